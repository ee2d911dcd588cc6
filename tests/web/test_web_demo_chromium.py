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
import shutil
from pathlib import Path

import pytest
from cdp import chromium, open_page, sockets
from demos.web.run import WebDemo

from actorbus.testing import wait_until

ROOT = Path(__file__).resolve().parents[2]


def test_the_page_plots_averages_follows_the_feed_state_and_streams_replies(
    tmp_path: Path,
) -> None:
    sockets_before = sockets()
    with WebDemo(port=0, period_ms=20, seed=7) as demo, chromium(tmp_path / "profile") as browser:
        page = open_page(browser, demo.url)
        page.report = "JSON.stringify(window.demo ?? null, (k, v) => k === `bus` ? undefined : v)"
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
    assert wait_until(lambda: sockets() <= sockets_before, 5.0), "sockets left open"
