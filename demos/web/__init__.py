"""The web demo: the calculator's actors on a node serving J.REP and a live page."""

from __future__ import annotations

from pathlib import Path

#: the page's files (index.html, app.js), served by the gateway's static directory
PAGE_DIR = Path(__file__).with_name("page")
