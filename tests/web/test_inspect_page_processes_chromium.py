"""The inspect page in headless Chromium (tests/web/cdp.py) against the calculator
demo as three ``actorbus run`` processes (tests/calculator_nodes.py: the demo's
properties files with free ports): the calculator node's copy adds a J.REP
gateway on loopback serving ``/inspect`` with a token file.  The page shows the
calculator publishing, follows it to FeedDown (the data feed's history ending
DOWN) when the source process is killed, and back to Publishing when a new
source process links.  A screenshot is saved under the test's tmp dir."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cdp import chromium, open_page, sockets
from inspect_page import DATA, MACHINE, STATE, feed_row, history_of, screenshot, shows_diagram_of

from actorbus.testing import wait_until
from calculator_nodes import Process, demo_configs, free_port

TOKEN = "inspect-processes-token-0123456789"
WAIT = 30.0  # a shared machine: three Python processes and a browser on two cores
#: the page's row of the calculator's subscription to the source's data points
DATA_ROW = feed_row(DATA, "subscriber")
#: the state of the page's link from the source node ('' when there is none)
SOURCE_LINK = (
    "([...document.querySelectorAll('#links tbody tr')]"
    ".map(r => [...r.cells].map(c => c.textContent))"
    ".find(c => c[1] === 'source') || [])[3] || ''"
)


@pytest.fixture
def started() -> Iterator[Callable[..., Process]]:
    processes: list[Process] = []

    def start(*args: str) -> Process:
        p = Process(*args)
        processes.append(p)
        return p

    yield start
    for p in processes:
        p.stop()


def listening(port: int, calc: Process) -> bool:
    """Whether the calculator node's gateway takes connections (the node still running)."""
    assert calc.proc.poll() is None, calc.proc.stderr.read() if calc.proc.stderr else ""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_the_page_follows_the_calculator_as_the_source_process_dies_and_returns(
    tmp_path: Path, started: Callable[..., Process]
) -> None:
    assert shutil.which("dot"), "Graphviz's dot is needed to draw the machine (graphviz)"
    service, web = free_port(), free_port()
    assert service != web
    configs = demo_configs(tmp_path, service)
    token = tmp_path / "web.token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    calculator = configs["calculator"]
    calculator.write_text(
        calculator.read_text()
        + "actorbus.jrep.gateways = web\n"
        + "actorbus.jrep.gateway.web.host = 127.0.0.1\n"
        + f"actorbus.jrep.gateway.web.port = {web}\n"
        + "actorbus.jrep.gateway.web.inspectPage = true\n"
        + f"actorbus.jrep.gateway.web.tokenFile = {token}\n"
    )
    sockets_before = sockets()

    calc = started("run", str(calculator))
    assert wait_until(lambda: listening(web, calc), WAIT, interval=0.05), "no gateway"
    source = started("run", str(configs["source"]))
    started("run", str(configs["sink"]))
    with chromium(tmp_path / "profile") as browser:
        page = open_page(browser, f"http://127.0.0.1:{web}/inspect?token={TOKEN}")
        page.report = (
            "JSON.stringify({error: window.inspect?.error, polls: window.inspect?.polls,"
            f" state: {STATE}, feed: {DATA_ROW}, link: {SOURCE_LINK}}})"
        )
        page.until("window.inspect && window.inspect.polls >= 1", "a first poll", WAIT)
        assert page.evaluate("document.getElementById('node').textContent") == "calculator"

        # the source process linked and publishing: the calculator publishes averages
        page.until(f"{STATE} === 'Publishing'", "the calculator Publishing", WAIT)
        shows_diagram_of(page, "Publishing")
        page.until(f"{DATA_ROW}[7] === 'UP'", "the source's feed UP", WAIT)
        assert page.evaluate(SOURCE_LINK) == "logged on"

        # kill the source process: its link ends, the data feed goes DOWN, FeedDown
        source.proc.kill()
        page.until(f"{STATE} === 'FeedDown'", "the calculator in FeedDown", WAIT)
        page.until(f"{DATA_ROW}[7] === 'DOWN'", "the source's feed DOWN", WAIT)
        page.until(f"{history_of(DATA)}.at(-1).className === 'DOWN'", "history ending DOWN", WAIT)
        assert page.evaluate(f"{history_of(DATA)}.map(s => s.className)")[-2:] == ["UP", "DOWN"]
        assert page.evaluate(f"{MACHINE}.querySelector('tbody tr').cells[1].textContent") == (
            "feed_down"
        )
        shows_diagram_of(page, "FeedDown")
        source.stop()

        # a new source process: the calculator publishes again, the history ends UP
        started("run", str(configs["source"]))
        page.until(f"{STATE} === 'Publishing'", "the calculator Publishing again", WAIT)
        page.until(f"{DATA_ROW}[7] === 'UP'", "the source's feed UP again", WAIT)
        page.until(f"{history_of(DATA)}.at(-1).className === 'UP'", "history ending UP", WAIT)
        assert page.evaluate(f"{history_of(DATA)}.map(s => s.className)")[-3:] == [
            "UP",
            "DOWN",
            "UP",
        ]
        page.until(f"{SOURCE_LINK} === 'logged on'", "the new source's link", WAIT)
        shows_diagram_of(page, "Publishing")
        assert page.problems == []

        saved = tmp_path / "inspect-page-processes.png"
        saved.write_bytes(screenshot(page))
        assert saved.stat().st_size > 0 and saved.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
        print(f"screenshot: {saved}")
    assert wait_until(lambda: sockets() <= sockets_before, 5.0), "sockets left open"
