"""What the inspect page's tests read off the page (tests/web/cdp.py drives the
browser): a feed's row, the calculator's machine, a key's UP/DOWN history, the
machine's diagram, a screenshot.  Imported as ``inspect_page`` (tests/web is on
sys.path)."""

from __future__ import annotations

import base64

from cdp import Page

DATA = "demo.calculator.DataPoint"
MACHINE = "document.querySelector('#machines section[data-actor=calculator]')"
#: the calculator's current state, as the page's machine section shows it
STATE = f"{MACHINE}?.querySelector('.state')?.textContent"


def feed_row(message_type: str, role: str) -> str:
    """The page's feed row of ``message_type`` in ``role``, as a list of its cells' text."""
    return (
        "[...document.querySelectorAll('#feeds tbody tr')]"
        ".map(r => [...r.cells].map(c => c.textContent))"
        f".find(c => c[0] === '{message_type}' && c[2] === '{role}')"
    )


def history_of(message_type: str) -> str:
    """The ``span``s (class and text ``UP``/``DOWN``) of the key's history row."""
    return (
        "[...[...document.querySelectorAll('#history tbody tr')]"
        f".find(r => r.cells[0].textContent === '{message_type}').cells[2]"
        ".querySelectorAll('span')]"
    )


def shows_diagram_of(page: Page, state: str) -> None:
    page.until(
        f"(() => {{ const img = {MACHINE}?.querySelector('img');"
        f" return !!img && img.src.includes('state={state}') && img.complete"
        " && img.naturalWidth > 0; })()",
        f"the machine's diagram drawn in {state}",
    )


def screenshot(page: Page) -> bytes:
    """The whole page (beyond the window) as a PNG."""
    size = page.call("Page.getLayoutMetrics")["cssContentSize"]
    shot = base64.b64decode(
        page.call(
            "Page.captureScreenshot",
            format="png",
            captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
        )["data"]
    )
    assert shot.startswith(b"\x89PNG\r\n\x1a\n") and len(shot) > 1000, len(shot)
    return shot
