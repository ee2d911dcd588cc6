"""The helpers that keep what a peer can make us log few and honest:
RateLimitedLog (one line per key per period, "N more like this"), Throttle
(one report per key per interval, counting the rest) and shown() (peer text
escaped and cut, so it cannot forge a line)."""

from __future__ import annotations

import pytest

from actorbus._log import RateLimitedLog, Throttle, shown


class Lines:
    """A RateLimitedLog's sink with a hand-driven clock."""

    def __init__(self) -> None:
        self.now = 100.0
        self.lines: list[tuple[str, str]] = []

    def sink(self, level: str, text: str, *args: object) -> None:
        self.lines.append((level, text.format(*args)))

    def log(self, period: float = 10.0, **kwargs: object) -> RateLimitedLog:
        return RateLimitedLog(period, clock=lambda: self.now, sink=self.sink, **kwargs)


def test_one_line_per_key_per_period_then_the_count_held_back() -> None:
    out = Lines()
    limited = out.log()
    for i in range(65_536):
        limited.warning(("node-a", "unexpected"), "node {} sent {}", "node-a", i)
    assert limited.warning(("node-b", "unexpected"), "node {} sent {}", "node-b", 0)  # per key
    assert out.lines == [("WARNING", "node node-a sent 0"), ("WARNING", "node node-b sent 0")]
    assert limited.held(("node-a", "unexpected")) == 65_535
    out.now += 10
    assert limited.warning(("node-a", "unexpected"), "node {} sent {}", "node-a", "x")
    assert out.lines[-1] == (
        "WARNING",
        "node node-a sent x (65,535 more like this since the last such line)",
    )
    assert limited.held(("node-a", "unexpected")) == 0


def test_close_says_how_many_each_key_held_back() -> None:
    out = Lines()
    limited = out.log()
    limited.info("k", "first {}", 1)
    limited.info("k", "second {}", 2)
    limited.info("k", "third {}", 3)
    limited.warning("quiet", "only {}", 1)
    limited.close()
    assert out.lines == [
        ("INFO", "first 1"),
        ("WARNING", "only 1"),
        ("INFO", "third 3 ... and 2 more like this"),
    ]
    limited.close()  # nothing left to say
    assert len(out.lines) == 3


def test_a_burst_shows_a_quiet_key_whole_and_a_flood_once_per_period() -> None:
    out = Lines()
    timers: list[tuple[float, object]] = []
    limited = out.log(schedule=lambda delay, callback: timers.append((out.now + delay, callback)))

    def fire() -> None:  # the loop running the summaries due by now
        for due, callback in [t for t in timers if t[0] <= out.now]:
            timers.remove((due, callback))
            callback()  # type: ignore[operator]

    # quiet: three peers log on at start, all shown
    for peer in ("a", "b", "c"):
        assert limited.info("logged on", "logged on with {}", peer, burst=5)
    assert [t for _, t in out.lines] == ["logged on with a", "logged on with b", "logged on with c"]
    # a flood: 100,000 logons over 60 s write one line per 10 s, each with its count
    out.lines.clear()
    for i in range(100_000):
        out.now = 100.0 + i * 60 / 100_000
        fire()
        limited.info("logged on", "logged on with {}", f"x{i}", burst=5)
    out.now = 200.0
    fire()
    texts = [t for _, t in out.lines]
    assert 6 <= len(texts) <= 9, texts
    assert texts[:2] == ["logged on with x0", "logged on with x1"]  # the burst's last two
    summaries = [t for t in texts if "more like this in the last 10 s" in t]
    assert len(summaries) >= 5
    held = sum(int(t.split("(")[1].split()[0].replace(",", "")) for t in summaries)
    assert 2 + held == 100_000  # every line shown or counted
    assert limited.held("logged on") == 0
    # the flood is over: after a quiet window the burst is back
    out.now = 300.0
    out.lines.clear()
    for peer in ("d", "e"):
        assert limited.info("logged on", "logged on with {}", peer, burst=5)
    assert len(out.lines) == 2


def test_keys_a_peer_makes_up_are_bounded() -> None:
    out = Lines()
    limited = out.log(max_keys=3)
    for i in range(1_000):
        limited.warning(("peer", i), "line {}", i)
    # three keys of their own, then every other key shares one overflow key
    assert [text for _, text in out.lines] == ["line 0", "line 1", "line 2", "line 3"]
    assert limited.held(RateLimitedLog.OVERFLOW) == 996


def test_arguments_are_escaped_so_a_line_stays_one_line() -> None:
    out = Lines()
    limited = out.log()
    limited.warning("k", "node {} logged off: {} ({} frames)", "evil\nFORGED LINE", "\x1b[2J", 7)
    ((_, text),) = out.lines
    assert "\n" not in text and "\x1b" not in text
    assert text == "node 'evil\\nFORGED LINE' logged off: '\\x1b[2J' (7 frames)"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("node-a", "node-a"),
        ("a b:c", "a b:c"),  # printable text stays as it is
        ("a\nb", "'a\\nb'"),
        ("a\r\nb", "'a\\r\\nb'"),
        ("\x1b[31mred", "'\\x1b[31mred'"),
        ("rtl\u202eevil", "'rtl\\u202eevil'"),  # bidi override
        ("line\u2028sep", "'line\\u2028sep'"),
        ("x" * 130, repr("x" * 120) + "...(10 more characters)"),
    ],
)
def test_shown_escapes_and_cuts_peer_text(value: str, expected: str) -> None:
    assert shown(value) == expected
    assert shown(value).isprintable()


def test_lines_go_to_loguru_under_the_library_name(log_lines: list[str]) -> None:
    limited = RateLimitedLog(60.0)
    limited.warning("k", "peer {} misbehaves", "a\nb")
    limited.warning("k", "peer {} misbehaves", "c")
    limited.close()
    assert log_lines == ["peer 'a\\nb' misbehaves", "peer c misbehaves ... and 1 more like this"]


def test_throttle_lets_one_report_through_per_interval_and_counts_the_rest() -> None:
    now = [100.0]
    throttle = Throttle(30.0, clock=lambda: now[0])
    assert throttle.allow("a") == 0
    assert throttle.allow("a") is None
    assert throttle.allow("b") == 0  # per key
    now[0] += 10
    assert throttle.allow("a") is None
    now[0] += 25
    assert throttle.allow("a") == 2  # two held back since the last one
    assert throttle.allow("a") is None
    throttle.forget("a")
    assert throttle.allow("a") == 0
