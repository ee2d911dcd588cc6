"""The failure contract: an exception in actor code is reported once by default
(stderr with no logging configured; the application's logging when it has some),
``on_failure`` sees it first; a replier's mistakes reach the requestor as ERROR
replies at once; a BaseException that is not an Exception is never swallowed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actorbus import (
    Actor,
    Bus,
    BusConfig,
    IncomingRequest,
    Notification,
    Reply,
    ReplyStatus,
    Request,
    RequestError,
    wait_for_stop,
)
from actorbus.actors import FailedTask
from actorbus.config import DispatcherConfig, DispatcherKind

WAIT = 10.0


class Tick(Notification):
    n: int


class Answer(Reply):
    n: int


class Other(Reply):
    text: str


class Ask(Request, replies=(Answer,)):
    n: int


@pytest.fixture
def bus() -> Iterator[Bus]:
    with Bus() as b:
        yield b


def _run(script: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter, as a new user's program would run."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


_FAILING_APP = """
    import threading
    from actorbus import Actor, Bus, Notification
    {setup}

    class Tick(Notification):
        n: int

    class Printer(Actor):
        def startup(self):
            self.subscribe(Tick, "/demo", on_message=self.show)

        def show(self, msg, feed):
            raise ValueError(f"cannot show {{msg.n}}")

    with Bus() as bus:
        printer = Printer("printer")
        bus.register(printer)
        bus.startup(printer).wait(10)
        with bus.publisher(Tick, "/demo") as pub:
            pub.publish(Tick("/demo", n=3))
            done = threading.Event()
            printer.post(done.set)      # runs after the failed delivery
            assert done.wait(10)
    print("app finished")
"""


def test_a_failing_callback_reaches_stderr_with_no_logging_configured() -> None:
    done = _run(_FAILING_APP.format(setup=""))
    assert done.returncode == 0, done.stderr
    assert "app finished" in done.stdout
    err = done.stderr
    # once, with the actor, the callback, the feed key and the traceback
    assert err.count("raised ValueError: cannot show 3") == 1, err
    assert "Printer.show" in err and "'printer'" in err and "/demo" in err and "Tick" in err
    assert "Traceback (most recent call last)" in err
    assert ", in show\nValueError: cannot show 3" in err  # the frame that raised


def test_a_failing_callback_goes_to_the_applications_stdlib_logging() -> None:
    setup = (
        "import logging, sys\n"
        "    logging.basicConfig(stream=sys.stdout, format='APP %(name)s %(levelname)s %(message)s')"
    )
    done = _run(_FAILING_APP.format(setup=setup))
    assert done.returncode == 0, done.stderr
    assert "APP actorbus ERROR callback Printer.show" in done.stdout
    assert done.stdout.count("cannot show 3") == 2  # the message and the traceback's last line
    assert "cannot show" not in done.stderr  # not twice


def test_a_failing_callback_goes_to_loguru_once_when_enabled() -> None:
    setup = "import actorbus\n    actorbus.enable_logging('INFO')"
    done = _run(_FAILING_APP.format(setup=setup))
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "raised ValueError" in line]
    assert len(lines) == 1, done.stderr
    assert "ERROR" in lines[0] and "actorbus.actors.failure" in lines[0]


def test_logging_can_be_turned_off() -> None:
    setup = "import logging\n    logging.getLogger('actorbus').disabled = True"
    done = _run(_FAILING_APP.format(setup=setup))
    assert done.returncode == 0, done.stderr
    assert "cannot show" not in done.stderr


def test_on_failure_sees_the_exception_and_the_task(bus: Bus) -> None:
    seen: list[tuple[Exception, FailedTask]] = []
    handled = threading.Event()

    class Printer(Actor):
        def startup(self) -> None:
            self.subscribe(Tick, "/demo", on_message=self.show)

        def show(self, msg: Tick, feed: Any) -> None:
            raise KeyError(msg.n)

        def on_failure(self, exc: Exception, task: FailedTask) -> None:
            seen.append((exc, task))
            handled.set()

    printer = Printer("printer")
    bus.register(printer)
    bus.startup(printer).wait(WAIT)
    with bus.publisher(Tick, "/demo") as pub:
        pub.publish(Tick("/demo", n=5))
        assert handled.wait(WAIT)
    exc, task = seen[0]
    assert isinstance(exc, KeyError)
    assert task.actor == "printer" and task.dispatcher == "default"
    assert task.callback.endswith("Printer.show")
    assert task.key == pub.key
    assert isinstance(task.message, Tick) and task.message.n == 5
    assert "Printer.show" in str(task) and "printer" in str(task)
    assert bus.runtime.dispatcher("default").stats().task_failures == 1


def test_a_failing_timer_names_the_timer(bus: Bus) -> None:
    seen: list[FailedTask] = []
    handled = threading.Event()

    class Ticker(Actor):
        def startup(self) -> None:
            self.schedule(0.001, self.tick)

        def tick(self) -> None:
            raise RuntimeError("tick failed")

        def on_failure(self, exc: Exception, task: FailedTask) -> None:
            seen.append(task)
            handled.set()

    t = Ticker("ticker")
    bus.register(t)
    bus.startup(t).wait(WAIT)
    assert handled.wait(WAIT)
    assert seen[0].callback.startswith("timer ") and "Ticker.tick" in seen[0].callback
    assert seen[0].key is None


def test_the_actor_keeps_running_after_a_failure(bus: Bus) -> None:
    got: list[int] = []
    three = threading.Event()

    class Picky(Actor):
        def startup(self) -> None:
            self.subscribe(Tick, "/p", on_message=self.got)

        def got(self, msg: Tick, feed: Any) -> None:
            if msg.n == 1:
                raise ValueError("one")
            got.append(msg.n)
            if len(got) == 2:
                three.set()

        def on_failure(self, exc: Exception, task: FailedTask) -> None:
            pass  # handled: no report

    a = Picky("picky")
    bus.register(a)
    bus.startup(a).wait(WAIT)
    with bus.publisher(Tick, "/p") as pub:
        for n in range(3):
            pub.publish(Tick("/p", n=n))
        assert three.wait(WAIT)
    assert got == [0, 2]


def test_a_disallowed_reply_class_ends_the_request_with_an_error_at_once(bus: Bus) -> None:
    refused: list[Exception] = []
    reported = threading.Event()

    class Wrong(Actor):
        def startup(self) -> None:
            self.replier(Ask, "/q", on_request=self.answer)

        def answer(self, incoming: IncomingRequest[Ask]) -> None:
            incoming.reply(Other("/q", text="not allowed"))

        def on_failure(self, exc: Exception, task: FailedTask) -> None:
            refused.append(exc)
            reported.set()

    a = Wrong("wrong")
    bus.register(a)
    bus.startup(a).wait(WAIT)
    replies = bus.request_all(Ask("/q", n=1), timeout=60.0)  # far longer than the test may take
    assert len(replies) == 1
    assert replies[0].status is ReplyStatus.ERROR
    assert "Other" in (replies[0].reason or "") and "Ask does not allow" in (
        replies[0].reason or ""
    )
    assert "timed out" not in (replies[0].reason or "")
    assert reported.wait(WAIT)
    assert isinstance(refused[0], RequestError)  # and the replier learns its mistake


def test_a_request_callback_that_raises_answers_error_at_once(bus: Bus) -> None:
    class Broken(Actor):
        def startup(self) -> None:
            self.replier(Ask, "/b", on_request=self.answer)

        def answer(self, incoming: IncomingRequest[Ask]) -> None:
            raise ZeroDivisionError("secret detail")

        def on_failure(self, exc: Exception, task: FailedTask) -> None:
            pass

    a = Broken("broken")
    bus.register(a)
    bus.startup(a).wait(WAIT)
    replies = bus.request_all(Ask("/b", n=1), timeout=60.0)
    assert [r.status for r in replies] == [ReplyStatus.ERROR]
    reason = replies[0].reason or ""
    assert "ZeroDivisionError" in reason
    assert "secret detail" not in reason  # an exception's text stays in the replier's log


def test_on_failure_that_raises_reports_both() -> None:
    script = """
        import threading
        from actorbus import Actor, Bus, Notification

        class Tick(Notification):
            n: int

        class Bad(Actor):
            def startup(self):
                self.subscribe(Tick, "/b", on_message=self.got)
            def got(self, msg, feed):
                raise ValueError("first")
            def on_failure(self, exc, task):
                raise RuntimeError("hook broke")

        with Bus() as bus:
            a = Bad("bad")
            bus.register(a)
            bus.startup(a).wait(10)
            with bus.publisher(Tick, "/b") as pub:
                pub.publish(Tick("/b", n=1))
                done = threading.Event()
                a.post(done.set)
                assert done.wait(10)
    """
    done = _run(script)
    assert done.returncode == 0, done.stderr
    assert "raised ValueError: first" in done.stderr
    assert "raised RuntimeError: hook broke" in done.stderr


# ------------------------------------------------------------ BaseException


@pytest.mark.parametrize("kind", [DispatcherKind.BLOCKING, DispatcherKind.ASYNCIO])
def test_system_exit_in_actor_code_is_not_swallowed(kind: DispatcherKind) -> None:
    config = BusConfig(dispatchers=(DispatcherConfig(name="d", kind=kind, is_default=True),))
    stopped = threading.Event()

    class Quitter(Actor):
        def startup(self) -> None:
            self.subscribe(Tick, "/q", on_message=self.got)

        def got(self, msg: Tick, feed: Any) -> None:
            raise SystemExit(3)

        def shutdown(self) -> None:
            stopped.set()  # the dispatcher survived, so shutdown still runs

    bus = Bus(config)
    try:
        q = Quitter("quitter")
        bus.register(q)
        bus.startup(q).wait(WAIT)
        pub = bus.publisher(Tick, "/q")
        pub.publish(Tick("/q", n=1))
        with pytest.raises(SystemExit) as info:
            wait_for_stop(WAIT)  # woken by the exit, which it raises here
        assert info.value.code == 3
        pub.close()
    finally:
        bus.close()  # raised already: close does not raise it again
    assert stopped.is_set()


def test_system_exit_nobody_waited_for_is_raised_by_close() -> None:
    ran = threading.Event()

    class Quitter(Actor):
        def startup(self) -> None:
            self.post(self.quit)

        def quit(self) -> None:
            ran.set()
            raise SystemExit("bye")

    bus = Bus()
    q = Quitter("quitter")
    bus.register(q)
    bus.startup(q).wait(WAIT)
    assert ran.wait(WAIT)
    with pytest.raises(SystemExit, match="bye"):
        bus.close()
    assert bus.is_closed


def test_keyboard_interrupt_in_actor_code_stops_the_node_in_the_main_thread() -> None:
    script = """
        import threading
        from actorbus import Actor, Bus, wait_for_stop

        class Ctrl(Actor):
            def startup(self):
                self.post(self.boom)
            def boom(self):
                raise KeyboardInterrupt
            def shutdown(self):
                print("shutdown ran", flush=True)

        with Bus() as bus:
            bus.register(Ctrl("ctrl"))
            bus.startup_all().wait(10)
            try:
                wait_for_stop(30)
            except KeyboardInterrupt:
                print("main thread got KeyboardInterrupt", flush=True)
            bus.shutdown_all().wait(10)
    """
    done = _run(script)
    assert done.returncode == 0, done.stderr
    assert "main thread got KeyboardInterrupt" in done.stdout
    assert "shutdown ran" in done.stdout
    assert "CRITICAL" not in done.stdout
    assert "Ctrl.boom" in done.stderr and "the node stops" in done.stderr


def test_startup_failure_is_reported_and_raised_to_the_waiter(bus: Bus) -> None:
    class NoStart(Actor):
        def startup(self) -> None:
            raise OSError("port in use")

    a = NoStart("nostart")
    bus.register(a)
    with pytest.raises(OSError, match="port in use"):
        bus.startup(a).wait(WAIT)
    assert not a.is_started
