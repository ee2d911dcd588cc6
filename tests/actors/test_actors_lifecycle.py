"""Registration, dispatcher choice, startup/shutdown semantics, Completion, close()."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from actorbus import Actor, ActorRuntime, BusConfig, Completion, ConfigError, UsageError
from actorbus.actors import NotRegisteredError, RuntimeClosedError, UnknownDispatcherError
from actorbus.config import DispatcherConfig, DispatcherKind
from actorbus.errors import RegistrationError

WAIT = 10.0
FAST = DispatcherConfig(name="fast", kind=DispatcherKind.BLOCKING)
SLOW = DispatcherConfig(name="slow", kind=DispatcherKind.BLOCKING, is_default=True)
LOOP = DispatcherConfig(name="loop", kind=DispatcherKind.ASYNCIO)

Make = Callable[..., ActorRuntime]


class Counting(Actor):
    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.startups = 0
        self.shutdowns = 0
        self.started_on = ""

    def startup(self) -> None:
        self.startups += 1
        self.started_on = threading.current_thread().name

    def shutdown(self) -> None:
        self.shutdowns += 1


class Base(Actor):
    pass


class Middle(Base):
    pass


class Leaf(Middle):
    pass


def _path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# ----------------------------------------------------------------- registration


def test_register_twice_raises(make_runtime: Make) -> None:
    runtime = make_runtime()
    a = Actor("twice")
    runtime.register(a)
    with pytest.raises(RegistrationError, match="'twice' is already registered.*'default'"):
        runtime.register(a)
    runtime.ensure_registered(a)  # fine: already registered here


def test_register_with_another_runtime_raises(make_runtime: Make) -> None:
    first, second = make_runtime(), make_runtime()
    a = Actor("shared")
    first.register(a)
    with pytest.raises(RegistrationError, match="another runtime"):
        second.register(a)
    with pytest.raises(RegistrationError, match="another runtime"):
        second.ensure_registered(a)


def test_unknown_dispatcher_lists_known_ones(make_runtime: Make) -> None:
    runtime = make_runtime(FAST, SLOW)
    a = Actor("lost")
    with pytest.raises(UnknownDispatcherError, match="'nope'.*known dispatchers: 'fast', 'slow'"):
        runtime.register(a, dispatcher="nope")
    with pytest.raises(UnknownDispatcherError, match="known dispatchers: 'fast', 'slow'"):
        runtime.dispatcher("nope")
    assert not a.actor_context.is_registered


def test_dispatcher_chosen_by_argument_class_or_default(make_runtime: Make) -> None:
    pinned = DispatcherConfig(name="pinned", classes=(_path(Middle),))
    leafs = DispatcherConfig(name="leafs", classes=(_path(Leaf),))
    runtime = make_runtime(SLOW, pinned, leafs)
    plain, base, middle, leaf = Actor("plain"), Base("base"), Middle("middle"), Leaf("leaf")
    for a in (plain, base, middle, leaf):
        runtime.register(a)
    assert plain.actor_context.dispatcher_name == "slow"  # the default
    assert base.actor_context.dispatcher_name == "slow"  # a base of a pinned class is not pinned
    assert middle.actor_context.dispatcher_name == "pinned"
    assert leaf.actor_context.dispatcher_name == "leafs"  # its own entry beats its base's
    chosen = Leaf("chosen")
    runtime.register(chosen, dispatcher="pinned")  # the argument wins
    assert chosen.actor_context.dispatcher_name == "pinned"
    assert runtime.default_dispatcher.name == "slow"


def test_subclass_of_pinned_class_follows_nearest_base(make_runtime: Make) -> None:
    class Deeper(Middle):
        pass

    runtime = make_runtime(SLOW, DispatcherConfig(name="pinned", classes=(_path(Middle),)))
    a = Deeper("deeper")
    runtime.register(a)
    assert a.actor_context.dispatcher_name == "pinned"


def test_register_rejects_non_actors_and_bad_callables(make_runtime: Make) -> None:
    runtime = make_runtime()
    with pytest.raises(RegistrationError, match="expects an Actor, got str"):
        runtime.register("not an actor")  # type: ignore[arg-type]
    with pytest.raises(RegistrationError, match="startup=42 is not callable"):
        runtime.register(Actor("x"), startup=42)  # type: ignore[arg-type]


def test_actor_without_super_init_still_registers(make_runtime: Make) -> None:
    class Forgetful(Actor):
        def __init__(self, value: int) -> None:
            self.value = value  # no super().__init__()

        def startup(self) -> None:
            self.seen = self.value

    runtime = make_runtime()
    a = Forgetful(3)
    runtime.startup(a).wait(WAIT)
    assert a.seen == 3
    assert a.name.startswith("Forgetful-")
    assert a.actor_context.dispatcher_name == "default"


def test_default_names_count_per_class() -> None:
    class Named(Actor):
        pass

    first, second = Named(), Named()
    n1 = int(first.name.rsplit("-", 1)[1])
    assert second.name == f"{first.name.rsplit('-', 1)[0]}-{n1 + 1}"
    assert Actor("given").name == "given"
    with pytest.raises(UsageError, match="actor name '' is not allowed"):
        Actor("")


def test_name_can_change_only_before_registration(make_runtime: Make) -> None:
    runtime = make_runtime()
    a = Actor()
    a.name = "renamed"
    runtime.register(a)
    assert runtime.dispatcher("default").stats().mailboxes[0].actor == "renamed"
    with pytest.raises(UsageError, match="'renamed' is registered"):
        a.name = "again"


def test_unregistered_actor_cannot_post_or_schedule() -> None:
    a = Actor("loose")
    with pytest.raises(NotRegisteredError, match="'loose' is not registered.*register"):
        a.post(print)
    with pytest.raises(NotRegisteredError, match="schedule timers"):
        a.schedule(1.0, print)
    with pytest.raises(NotRegisteredError):
        _ = a.actor_context.runtime
    assert a.actor_context.dispatcher_name is None
    assert not a.actor_context.is_registered


def test_unregister(make_runtime: Make) -> None:
    runtime = make_runtime()
    a = Counting("leaving")
    runtime.startup(a).wait(WAIT)
    timer = a.schedule(60.0, print)
    with pytest.raises(RegistrationError, match="'leaving' is started; stop it first"):
        runtime.unregister(a)
    runtime.shutdown(a).wait(WAIT)
    assert timer.cancelled  # stopping an actor cancels its timers
    runtime.unregister(a)
    assert not a.actor_context.is_registered
    assert runtime.actors == ()
    assert runtime.dispatcher("default").stats().mailboxes == ()
    with pytest.raises(NotRegisteredError):
        runtime.unregister(a)
    runtime.register(a)  # may be registered again
    assert a.actor_context.is_registered


def test_opening_a_feed_style_ensure_registered_does_not_start(make_runtime: Make) -> None:
    runtime = make_runtime()
    a = Counting("implicit")
    runtime.ensure_registered(a)
    runtime.ensure_registered(a)
    assert a.actor_context.is_registered
    assert not a.is_started
    assert a.startups == 0


# -------------------------------------------------------------------- lifecycle


def test_registration_does_not_run_startup(make_runtime: Make) -> None:
    runtime = make_runtime()
    a = Counting("quiet")
    runtime.register(a)
    done = threading.Event()
    a.post(done.set)
    assert done.wait(WAIT)
    assert a.startups == 0
    assert not a.is_started


def test_startup_callables_given_at_registration(make_runtime: Make) -> None:
    runtime = make_runtime()
    a = Counting("callables")
    calls: list[tuple[str, str]] = []
    runtime.register(
        a,
        startup=lambda: calls.append(("up", threading.current_thread().name)),
        shutdown=lambda: calls.append(("down", threading.current_thread().name)),
    )
    runtime.startup(a).wait(WAIT)
    runtime.shutdown(a).wait(WAIT)
    assert calls == [("up", "actorbus-default-0"), ("down", "actorbus-default-0")]
    assert a.startups == a.shutdowns == 0  # the methods were replaced


def test_start_started_and_stop_stopped_are_no_ops(make_runtime: Make) -> None:
    runtime = make_runtime()
    a = Counting("idempotent")
    runtime.register(a)
    runtime.shutdown(a).wait(WAIT)  # not started: nothing to do
    assert a.shutdowns == 0
    runtime.startup(a).wait(WAIT)
    runtime.startup(a).wait(WAIT)
    assert a.startups == 1
    runtime.shutdown(a).wait(WAIT)
    runtime.shutdown(a).wait(WAIT)
    assert a.shutdowns == 1


def test_startup_completes_before_later_posted_tasks(make_runtime: Make) -> None:
    runtime = make_runtime(DispatcherConfig(name="default", thread_count=4))

    class Opener(Actor):
        def startup(self) -> None:
            self.resource = "open"

    actors = [Opener(f"o{i}") for i in range(8)]
    seen: list[str] = []
    done = threading.Event()
    left = [len(actors)]
    lock = threading.Lock()

    def use(a: Opener) -> None:
        with lock:
            seen.append(getattr(a, "resource", "missing"))
            left[0] -= 1
            if not left[0]:
                done.set()

    completion = runtime.startup(actors)
    for a in actors:
        a.post(use, a)  # not waiting for the completion first
    assert done.wait(WAIT)
    completion.wait(WAIT)
    assert seen == ["open"] * len(actors)


def test_startup_all_and_shutdown_all(make_runtime: Make) -> None:
    runtime = make_runtime(FAST, SLOW)
    actors = [Counting(f"c{i}") for i in range(4)]
    for i, a in enumerate(actors):
        runtime.register(a, dispatcher="fast" if i % 2 else "slow")
    runtime.startup(actors[0]).wait(WAIT)
    completion = runtime.startup_all()
    assert set(completion.pending) <= {"c1", "c2", "c3"}
    completion.wait(WAIT)
    assert [a.startups for a in actors] == [1, 1, 1, 1]
    assert {a.started_on for a in actors} == {"actorbus-slow-0", "actorbus-fast-0"}
    runtime.shutdown_all().wait(WAIT)
    assert [a.shutdowns for a in actors] == [1, 1, 1, 1]
    runtime.startup_all().wait(WAIT)  # stopped actors start again
    assert [a.startups for a in actors] == [2, 2, 2, 2]


def test_several_startup_failures_raise_an_exception_group(make_runtime: Make) -> None:
    runtime = make_runtime()

    class Fails(Actor):
        def startup(self) -> None:
            raise ValueError(self.name)

    actors = [Fails("f1"), Fails("f2"), Counting("fine")]
    completion = runtime.startup(actors)
    with pytest.raises(ExceptionGroup) as info:
        completion.wait(WAIT)
    assert "startup failed for 2 actors" in str(info.value)
    assert sorted(str(e) for e in info.value.exceptions) == ["f1", "f2"]
    assert actors[2].is_started
    assert completion.done()
    assert len(completion.errors) == 2


def test_completion_timeout_names_pending_actors(make_runtime: Make) -> None:
    runtime = make_runtime()
    blocker, waiting = Actor("blocker"), Counting("stuck")
    runtime.register(blocker)
    runtime.register(waiting)
    gate = threading.Event()
    blocker.post(gate.wait, WAIT)  # occupies the only thread
    completion = runtime.startup(waiting)
    with pytest.raises(
        TimeoutError, match=r"startup of 1 of 1 actors.*'stuck' \(dispatcher 'default'\)"
    ):
        completion.wait(0.05)
    assert completion.pending == ("stuck",)
    gate.set()
    completion.wait(WAIT)
    assert waiting.is_started


def test_waiting_on_own_single_thread_deadlocks_is_refused(make_runtime: Make) -> None:
    runtime = make_runtime()
    a, b = Actor("waiter"), Counting("target")
    runtime.register(a)
    runtime.register(b)
    outcome: list[BaseException] = []
    done = threading.Event()

    def wait_inside() -> None:
        completion = runtime.startup(b)
        try:
            completion.wait(WAIT)
        except UsageError as exc:
            outcome.append(exc)
        completion.add_done_callback(lambda _: done.set())

    a.post(wait_inside)
    assert done.wait(WAIT)
    assert len(outcome) == 1
    assert "would deadlock" in str(outcome[0])
    assert b.is_started


def test_add_done_callback(make_runtime: Make) -> None:
    runtime = make_runtime()
    a = Counting("cb")
    called = threading.Event()
    names: list[str] = []

    def on_done(c: Completion) -> None:
        names.append(threading.current_thread().name)
        called.set()

    runtime.startup(a).add_done_callback(on_done)
    assert called.wait(WAIT)
    assert names == ["actorbus-default-0"]
    late: list[Completion] = []
    completion = runtime.startup(a)
    completion.wait(WAIT)
    completion.add_done_callback(late.append)  # already done: called at once
    assert late == [completion]


def test_empty_completion_is_done() -> None:
    completion = Completion("startup", [])
    assert completion.done()
    completion.wait(0)
    assert completion.exception() is None
    assert asyncio.run(_await(completion)) is None


async def _await(completion: Completion) -> None:
    await completion


def test_shutdown_of_unregistered_actor_raises(make_runtime: Make) -> None:
    runtime = make_runtime()
    with pytest.raises(NotRegisteredError, match="cannot shut down actor 'ghost'"):
        runtime.shutdown(Actor("ghost"))


def test_startup_after_unregister_reports_it(make_runtime: Make) -> None:
    runtime = make_runtime()
    blocker, a = Actor("blocker"), Counting("gone")
    runtime.register(blocker)
    runtime.register(a)
    gate = threading.Event()
    blocker.post(gate.wait, WAIT)
    completion = runtime.startup(a)
    runtime.unregister(a)  # before its startup task ran
    gate.set()
    with pytest.raises(NotRegisteredError, match="unregistered before its startup ran"):
        completion.wait(WAIT)
    assert a.startups == 0


# ------------------------------------------------------------------------ close


def test_close_shuts_down_started_actors_and_refuses_more(make_runtime: Make) -> None:
    runtime = make_runtime(FAST, SLOW)
    actors = [Counting(f"c{i}") for i in range(3)]
    runtime.startup(actors[:2]).wait(WAIT)
    runtime.register(actors[2])
    runtime.close()
    assert [a.shutdowns for a in actors] == [1, 1, 0]
    assert not any(a.actor_context.is_registered or a.is_started for a in actors)
    assert runtime.is_closed
    with pytest.raises(RuntimeClosedError, match="the runtime is closed"):
        runtime.register(Actor("late"))
    with pytest.raises(RuntimeClosedError):
        runtime.startup(Actor("late"))


def test_close_logs_shutdown_errors_instead_of_raising(make_runtime: Make) -> None:
    class BadExit(Actor):
        def shutdown(self) -> None:
            raise RuntimeError("boom")

    runtime = make_runtime()
    runtime.startup(BadExit("bad")).wait(WAIT)
    runtime.close()
    assert runtime.is_closed


def test_context_manager_closes() -> None:
    with ActorRuntime() as runtime:
        a = Counting("ctx")
        runtime.startup(a).wait(WAIT)
    assert a.shutdowns == 1
    assert not [t for t in threading.enumerate() if t.name.startswith("actorbus")]


def test_close_from_a_dispatcher_thread_is_refused(make_runtime: Make) -> None:
    runtime = make_runtime()
    a = Actor("closer")
    runtime.register(a)
    outcome: list[BaseException] = []
    done = threading.Event()

    def close_inside() -> None:
        try:
            runtime.close()
        except UsageError as exc:
            outcome.append(exc)
        done.set()

    a.post(close_inside)
    assert done.wait(WAIT)
    assert "cannot join itself" in str(outcome[0])
    assert not runtime.is_closed


def test_close_reports_threads_that_do_not_stop() -> None:
    runtime = ActorRuntime()
    a = Actor("hog")
    runtime.register(a)
    gate = threading.Event()
    entered = threading.Event()

    def hog() -> None:
        entered.set()
        gate.wait(WAIT)

    a.post(hog)
    assert entered.wait(WAIT)
    try:
        with pytest.raises(TimeoutError, match="actorbus-default-0"):
            runtime.close(timeout=0.1)
    finally:
        gate.set()
    runtime.close()  # already closed: returns at once; the thread ends by itself
    for t in threading.enumerate():
        if t.name == "actorbus-default-0":
            t.join(WAIT)


def test_loops_close_with_the_runtime(make_runtime: Make) -> None:
    runtime = make_runtime(SLOW, LOOP)
    loop = runtime.dispatcher("loop").loop
    assert loop is not None and loop.is_running()
    runtime.close()
    assert loop.is_closed()


# ----------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("dispatchers", "message"),
    [
        ((), "defines no dispatchers"),
        ((FAST, FAST), "'fast' is defined twice"),
        (
            (
                DispatcherConfig(name="a", is_default=True),
                DispatcherConfig(name="b", is_default=True),
            ),
            "'a', 'b' are all marked isDefault",
        ),
        (
            (
                DispatcherConfig(name="a", classes=("m.C",)),
                DispatcherConfig(name="b", classes=("m.C",)),
            ),
            "'m.C' is pinned to two dispatchers",
        ),
        ((DispatcherConfig(name="a", thread_count=0),), "threadCount=0: expected an integer >= 1"),
        ((DispatcherConfig(name="a", quantum_ns=0),), "quantum=0"),
        ((DispatcherConfig(name="a", spin_limit=-1),), "spinLimit=-1"),
        ((DispatcherConfig(name="a", park_time_ns=-5),), "parkTime=-5"),
    ],
)
def test_bad_configuration_is_refused(
    dispatchers: tuple[DispatcherConfig, ...], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        ActorRuntime(BusConfig(dispatchers=dispatchers))


def test_owner_and_dispatchers_mapping(make_runtime: Make) -> None:
    owner = object()
    runtime = make_runtime(FAST, SLOW, owner=owner)
    assert runtime.owner is owner
    assert list(runtime.dispatchers) == ["fast", "slow"]
    assert runtime.dispatchers["fast"] is runtime.dispatcher("fast")
    with pytest.raises(TypeError):
        runtime.dispatchers["x"] = runtime.dispatcher("fast")  # type: ignore[index]
    assert set(runtime.stats()) == {"fast", "slow"}
    assert "ActorRuntime open" in repr(runtime)
