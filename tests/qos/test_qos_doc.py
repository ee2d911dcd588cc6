"""docs/qos.md's example runs as written (its journal and state paths moved
under the test's temporary directory)."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from qos_support import WAIT, start

from actorbus import Bus

DOC = Path(__file__).resolve().parents[2] / "docs" / "qos.md"


def test_the_example_delivers_exactly_once(tmp_path: Path) -> None:
    code = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)[0]
    code = code.replace("/var/lib/desk/trades", str(tmp_path / "trades"))
    code = code.replace("/var/lib/ledger/state", str(tmp_path / "state"))
    namespace: dict[str, Any] = {"__name__": "qos_doc_example"}
    exec(compile(code, str(DOC), "exec"), namespace)
    taken: list[tuple[int, int]] = []
    done = threading.Event()

    class Ledger(namespace["Ledger"]):  # type: ignore[misc]
        def take(self, trade: Any, delivery: Any) -> None:
            taken.append((delivery.seq, trade.qty))
            if len(taken) == 3:
                done.set()

    with Bus(node_id="qos-doc") as bus:
        desk, ledger = namespace["Desk"](name="desk"), Ledger(name="ledger")
        start(bus, desk, ledger)
        for qty in (5, 7, 9):
            desk.post(desk.book, qty)
        assert done.wait(WAIT), taken
        bus.shutdown([desk, ledger]).wait(WAIT)
    assert taken == [(1, 5), (2, 7), (3, 9)]
