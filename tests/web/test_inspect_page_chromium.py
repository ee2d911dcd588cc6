"""The inspect page in a real browser (headless Chromium over the DevTools
Protocol, tests/web/cdp.py): a node runs the calculator's actors, the page
shows their feeds, the calculator's machine (its state, its diagram as an SVG
Graphviz drew on the node, its last transitions) and each key's UP/DOWN
history, and follows the node when the source stops.

A screenshot is saved under the test's tmp dir, and as ``docs/inspect-page.png``
only when ``ACTORBUS_UPDATE_SCREENSHOTS=1``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from cdp import chromium, open_page, sockets
from demos.calculator.actors import Calculator
from demos.web.actors import PausableSource
from inspect_page import DATA, MACHINE, feed_row, screenshot, shows_diagram_of

from actorbus import Bus
from actorbus.config import GatewaySettings
from actorbus.testing import wait_until

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "inspect-token-0123456789"

DATA_ROW = feed_row(DATA, "publisher")


@pytest.fixture
def node() -> Iterator[tuple[Bus, PausableSource, int]]:
    bus = Bus(node_id="calc-node")
    try:
        source = PausableSource("source", period_ms=20, seed=3)
        actors = [source, Calculator("calculator", window=5)]
        for actor in actors:
            bus.register(actor)
        bus.startup(actors).wait(10)
        gateway = bus.serve_jrep(
            0, name="web", settings=GatewaySettings(inspect_page=True), token=TOKEN.encode()
        )
        yield bus, source, gateway.port
        bus.shutdown_all().wait(10)
    finally:
        bus.close()


def test_the_page_shows_the_calculator_and_follows_the_source_stopping(
    node: tuple[Bus, PausableSource, int], tmp_path: Path
) -> None:
    bus, source, port = node
    sockets_before = sockets()
    assert shutil.which("dot"), "Graphviz's dot is needed to draw the machine (graphviz)"
    with chromium(tmp_path / "profile") as browser:
        page = open_page(browser, f"http://127.0.0.1:{port}/inspect?token={TOKEN}")
        page.report = "JSON.stringify({error: window.inspect?.error, polls: window.inspect?.polls})"
        page.until("window.inspect && window.inspect.polls >= 1", "a first poll")
        assert page.evaluate("document.getElementById('node').textContent") == "calc-node"

        # the calculator publishing: its machine's state, its diagram, the source's feed UP
        page.until(f"{MACHINE}?.querySelector('.state').textContent === 'Publishing'", "Publishing")
        shows_diagram_of(page, "Publishing")
        svg = page.evaluate(
            f"fetch({MACHINE}.querySelector('img').src).then(r => r.headers.get('content-type'))"
        )
        assert svg == "image/svg+xml"
        assert page.evaluate(f"{DATA_ROW}[7]") == "UP"
        events = page.evaluate(
            f"[...{MACHINE}.querySelectorAll('tbody tr')].map(r => r.cells[1].textContent)"
        )
        assert events[-1] == "<start>" and "feed_up" in events

        # stop the source: its feed goes DOWN, the calculator to FeedDown, the page follows
        source.pause()
        page.until(f"{DATA_ROW}[7] === 'DOWN'", "the source's feed DOWN")
        page.until(f"{MACHINE}.querySelector('.state').textContent === 'FeedDown'", "FeedDown")
        shows_diagram_of(page, "FeedDown")
        assert page.evaluate(f"{MACHINE}.querySelector('tbody tr').cells[1].textContent") == (
            "feed_down"
        )
        history = page.evaluate(
            "[...document.querySelectorAll('#history tbody tr')]"
            ".find(r => r.cells[0].textContent === 'demo.calculator.DataPoint')"
            ".cells[2].querySelectorAll('span').length"
        )
        assert history >= 2  # UP, then DOWN
        last = page.evaluate(
            "[...document.querySelectorAll('#history tbody tr')]"
            ".find(r => r.cells[0].textContent === 'demo.calculator.DataPoint')"
            ".cells[2].lastElementChild.className"
        )
        assert last == "DOWN"
        assert page.problems == []

        shot = screenshot(page)
        saved = tmp_path / "inspect-page.png"
        saved.write_bytes(shot)
        print(f"screenshot: {saved}")
        if os.environ.get("ACTORBUS_UPDATE_SCREENSHOTS") == "1":
            shutil.copy(saved, ROOT / "docs" / "inspect-page.png")
    assert wait_until(lambda: sockets() <= sockets_before, 5.0), "sockets left open"


def test_the_page_without_its_token_says_why_it_cannot_update(
    node: tuple[Bus, PausableSource, int], tmp_path: Path
) -> None:
    _bus, _source, port = node
    with chromium(tmp_path / "profile") as browser:
        page = open_page(browser, f"http://127.0.0.1:{port}/inspect")
        # the page itself needs the token too: the browser shows the 401's text
        page.until("document.body.textContent.includes('a valid token is required')", "the 401")
