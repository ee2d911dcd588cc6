"""Driving the system's Chromium, headless, over the Chrome DevTools Protocol with
the ``websockets`` library (no Playwright, no browser download): the browser as
a context manager (its process group killed on exit), a tab attached over a
flat session, ``Runtime.evaluate`` with promises awaited, and in-page waits with
deadlines.  Chromium missing is a failure naming the Debian package."""

from __future__ import annotations

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
from websockets.sync.client import ClientConnection, connect

from actorbus.testing import wait_until

WAIT = 20.0


def sockets() -> int:
    """How many sockets this process has open."""
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
        #: an expression whose value a failed :meth:`until` shows (the page's state)
        self.report = "null"

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
            f"page problems: {self.problems}; the page: {self.evaluate(self.report)}"
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


def open_page(browser: ClientConnection, url: str) -> Page:
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
