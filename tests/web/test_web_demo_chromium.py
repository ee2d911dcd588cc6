"""The web demo in a real browser: the system's Chromium, headless, driven over
the Chrome DevTools Protocol with the ``websockets`` library (no Playwright, no
browser download).

The page loads ``/actorbus.js`` from the demo's node, plots the moving averages,
shows the feed's state and asks the stats replier.  The test reads what the page
received (``window.demo``) and clicks its buttons; every wait is an in-page
promise with a timeout.  A screenshot is saved under ``artifacts/`` (its path is
printed).  Chromium missing is a failure naming the Debian package.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from demos.web.run import WebDemo
from websockets.sync.client import ClientConnection, connect

from actorbus.testing import wait_until

ROOT = Path(__file__).resolve().parents[2]
WAIT = 20.0


def _sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
    return count


class Page:
    """One tab of the browser, over a flat CDP session."""

    def __init__(self, ws: ClientConnection, session: str) -> None:
        self.ws, self.session = ws, session
        self.next_id = 0
        self.problems: list[str] = []  # the page's exceptions and console errors
        self.loaded = False

    def call(self, method: str, timeout: float = WAIT, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        ident = self.next_id
        self.ws.send(
            json.dumps({"id": ident, "method": method, "params": params, "sessionId": self.session})
        )
        while True:
            message = json.loads(self.ws.recv(timeout=timeout))
            if message.get("id") == ident:
                assert "error" not in message, f"{method}: {message['error']}"
                return message["result"]  # type: ignore[no-any-return]
            self._event(message)

    def navigate(self, url: str, timeout: float = WAIT) -> None:
        """Load ``url`` and wait for its load event."""
        self.loaded = False
        self.call("Page.navigate", url=url)
        while not self.loaded:
            self._event(json.loads(self.ws.recv(timeout=timeout)))

    def _event(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Page.loadEventFired":
            self.loaded = True
        elif method == "Runtime.exceptionThrown":
            self.problems.append(str(params["exceptionDetails"]))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.problems.append(str([a.get("value") for a in params.get("args", [])]))

    def evaluate(self, expression: str, timeout: float = WAIT) -> Any:
        result = self.call(
            "Runtime.evaluate",
            timeout=timeout + 5,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        assert "exceptionDetails" not in result, (expression, result, self.problems)
        return result["result"].get("value")

    def until(self, condition: str, what: str, timeout: float = WAIT) -> None:
        """Wait (in the page: a promise checked on a timer, with a deadline) for
        ``condition`` to be true."""
        expression = f"""new Promise((resolve) => {{
            const deadline = Date.now() + {int(timeout * 1000)};
            const check = () => {{
                let ok = false;
                try {{ ok = Boolean({condition}); }} catch (e) {{}}
                if (ok || Date.now() > deadline) resolve(ok); else setTimeout(check, 20);
            }};
            check();
        }})"""
        assert self.evaluate(expression, timeout), (
            f"the page never showed {what} within {timeout}s ({condition}); "
            f"page problems: {self.problems}; window.demo: "
            f"{self.evaluate('JSON.stringify(window.demo ?? null, (k, v) => k === `bus` ? undefined : v)')}"
        )


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator[ClientConnection]:
    """Headless Chromium with remote debugging; its browser-level CDP WebSocket.
    The browser (its whole process group) is killed on exit."""
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail(
            "chromium is not installed: this test needs the Debian package 'chromium' "
            "(apt-get install chromium; tools/ensure-system-tools.sh installs it)"
        )
    process = subprocess.Popen(
        [
            binary,
            "--headless=new",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "--no-sandbox",  # as root the sandbox refuses to start
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-extensions",
            "--window-size=1000,800",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        active = profile / "DevToolsActivePort"
        assert wait_until(
            lambda: active.exists() and len(active.read_text().splitlines()) >= 2, WAIT
        ), f"chromium wrote no DevToolsActivePort (exit status {process.poll()})"
        port, path = active.read_text().splitlines()[:2]
        with connect(f"ws://127.0.0.1:{port}{path}", max_size=None, open_timeout=WAIT) as ws:
            yield ws
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=WAIT)


def _open_page(browser: ClientConnection, url: str) -> Page:
    """A new tab attached over a flat session, then ``url`` loaded in it."""
    browser.send(
        json.dumps({"id": 1, "method": "Target.createTarget", "params": {"url": "about:blank"}})
    )
    target = None
    session = None
    while session is None:
        message = json.loads(browser.recv(timeout=WAIT))
        if message.get("id") == 1:
            target = message["result"]["targetId"]
            browser.send(
                json.dumps(
                    {
                        "id": 2,
                        "method": "Target.attachToTarget",
                        "params": {"targetId": target, "flatten": True},
                    }
                )
            )
        elif message.get("id") == 2:
            session = message["result"]["sessionId"]
    page = Page(browser, session)
    page.next_id = 10
    page.call("Runtime.enable")
    page.call("Page.enable")
    page.navigate(url)
    return page


def test_the_page_plots_averages_follows_the_feed_state_and_streams_replies(
    tmp_path: Path,
) -> None:
    sockets_before = _sockets()
    with WebDemo(port=0, period_ms=20, seed=7) as demo, chromium(tmp_path / "profile") as browser:
        page = _open_page(browser, demo.url)
        page.until("window.demo && window.demo.averages.length >= 20", ">= 20 averages")
        page.until("window.demo.state === 'UP'", "the feed UP")
        assert page.evaluate("document.getElementById('state').textContent") == "UP"
        assert all(0 <= a < 100 for a in page.evaluate("window.demo.averages"))

        # stop the source from the page: the averages' feed goes DOWN
        page.evaluate("document.getElementById('stop').click()")
        page.until("window.demo.state === 'DOWN'", "the feed DOWN")
        assert page.evaluate("document.getElementById('state').textContent") == "DOWN"
        assert demo.source is not None and demo.source.paused
        # and start it again: UP, and averages flow again
        seen = page.evaluate("window.demo.averages.length")
        page.evaluate("document.getElementById('start').click()")
        page.until("window.demo.state === 'UP'", "the feed UP again")
        page.until(f"window.demo.averages.length >= {seen + 10}", "averages after the restart")
        assert page.evaluate("window.demo.states") == ["UP", "DOWN", "UP"]

        # the stats form: three OK_CONTINUING replies, then the final one (the mean)
        page.evaluate(
            "document.getElementById('last-n').value = '3';"
            "document.getElementById('stats').requestSubmit()"
        )
        page.until("document.querySelectorAll('#replies li').length === 4", "four replies")
        replies = page.evaluate("window.demo.replies")
        assert [r["status"] for r in replies] == ["OK_CONTINUING"] * 3 + ["OK_FINAL"], replies
        assert [r["label"] for r in replies] == ["average 1", "average 2", "average 3", "mean"]
        mean = sum(r["value"] for r in replies[:3]) / 3
        assert replies[3]["value"] == pytest.approx(mean)
        final = page.evaluate("document.querySelector('#replies li.final').textContent")
        assert final.startswith("mean: "), final
        assert page.problems == []

        shot = base64.b64decode(page.call("Page.captureScreenshot", format="png")["data"])
        assert shot.startswith(b"\x89PNG")
        saved = tmp_path / "web-demo.png"
        saved.write_bytes(shot)
        artifacts = ROOT / "artifacts"
        artifacts.mkdir(exist_ok=True)
        shutil.copy(saved, artifacts / "web-demo.png")
        print(f"screenshot: {artifacts / 'web-demo.png'}")
    assert wait_until(lambda: _sockets() <= sockets_before, 5.0), "sockets left open"
