"""Rewrite the settings tables of docs/configuration.md from the settings types.

Each table sits between ``<!-- settings-table:NAME -->`` and
``<!-- /settings-table -->``, NAME a type of :mod:`actorbus.config.settings`;
what is between is replaced by ``markdown_table(NAME)``.  ``--check`` only
says whether the file is up to date (exit status 1 if not).  ``make
settings-tables`` runs it; tests/config/test_settings.py checks the doc.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from actorbus.config import settings

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
BLOCK = re.compile(r"(<!-- settings-table:(\w+) -->\n)(.*?)(<!-- /settings-table -->)", re.S)


def rewrite(text: str) -> str:
    """``text`` with every settings table regenerated."""

    def table(match: re.Match[str]) -> str:
        cls = getattr(settings, match.group(2))
        return match.group(1) + settings.markdown_table(cls) + match.group(4)

    return BLOCK.sub(table, text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check, write nothing")
    args = parser.parse_args()
    text = DOC.read_text(encoding="utf-8")
    new = rewrite(text)
    if new == text:
        return 0
    if args.check:
        print(f"{DOC}: the settings tables are out of date; run make settings-tables")
        return 1
    DOC.write_text(new, encoding="utf-8")
    print(f"{DOC}: settings tables rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
