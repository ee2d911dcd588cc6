"""``Bus.inspect()``: the figures of a node's snapshot — mailbox depth while an
actor is blocked, failures after a callback raised, link counters after
traffic, an FSM actor's bounded last transitions — and the same snapshot asked
for over a real loopback link, refused there by a permissions rule."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from statemachine import State

from actorbus import Actor, Bus, FeedState, Notification, ReplyStatus, Scope, UsageError
from actorbus.actors import FailedTask
from actorbus.bus import SYSTEM_SUBJECT
from actorbus.bus.permissions import Permissions
from actorbus.fsm import FsmActor, Machine
from actorbus.inspection import InspectNode, NodeInspected, NodeSnapshot


class Tick(Notification, type_name="inspecttest.Tick"):
    n: int


class Toggle(Machine):
    off = State(initial=True)
    on = State()
    flip = off.to(on) | on.to(off)
    stay = off.to.itself(internal=True) | on.to.itself(internal=True)


class Switch(FsmActor):
    machine = Toggle
    fsm_history = 3


class Gate(Actor):
    """Its first task blocks until ``release`` is set; a raising task is counted."""

    def __init__(self) -> None:
        super().__init__(name="gate")
        self.entered = threading.Event()
        self.release = threading.Event()
        self.failed = threading.Event()

    def block(self) -> None:
        self.entered.set()
        assert self.release.wait(10)

    def noop(self) -> None:
        pass

    def boom(self) -> None:
        raise ValueError("boom")

    def on_failure(self, exc: Exception, task: FailedTask) -> None:
        self.failed.set()  # counted by the dispatcher; not reported (the test raised it)


@pytest.fixture
def bus() -> Iterator[Bus]:
    with Bus(node_id="inspected") as b:
        yield b


def started(bus: Bus, actor: Actor) -> None:
    bus.register(actor)
    bus.startup(actor).wait(5)


def test_a_new_bus_shows_its_default_dispatcher_and_nothing_else(bus: Bus) -> None:
    snap = bus.inspect()
    assert snap.node == "inspected"
    assert snap.actors == () and snap.feeds == () and snap.links == ()
    assert [d.name for d in snap.dispatchers] == ["default"]
    assert snap.requests_outstanding == 0


def test_mailbox_depth_while_the_actor_is_blocked_then_its_tasks(bus: Bus) -> None:
    gate = Gate()
    started(bus, gate)
    gate.post(gate.block)
    assert gate.entered.wait(5)
    for _ in range(7):
        gate.post(gate.noop)
    info = bus.inspect().actor("gate")
    assert info is not None
    assert (info.mailbox, info.depth, info.started) == ("running", 7, True)
    assert info.class_name == f"{__name__}.Gate"
    assert info.dispatcher == "default"
    assert info.machine is None
    done = threading.Event()
    gate.post(done.set)
    gate.release.set()
    assert done.wait(5)
    info = bus.inspect().actor("gate")
    assert info is not None
    assert info.depth == 0
    assert info.max_depth >= 7
    # startup, block, 7 noops and done.set: counted per batch, the last batch
    # once its worker is done with it
    assert info.tasks_run >= 9


def test_failures_after_a_callback_raises(bus: Bus) -> None:
    gate = Gate()
    started(bus, gate)
    gate.post(gate.boom)
    assert gate.failed.wait(5)
    snap = bus.inspect()
    info = snap.actor("gate")
    assert info is not None and info.failures == 1
    (default,) = snap.dispatchers
    assert default.failures == 1 and default.actors == 1


def test_feeds_are_discoverys_rows(bus: Bus) -> None:
    bus.publisher(Tick, "/ticks")
    bus.inbox(Tick, "/ticks")
    feeds = {(f.role, f.subject, f.count, f.up) for f in bus.inspect().feeds}
    assert feeds == {("publisher", "/ticks", 1, 1), ("subscriber", "/ticks", 1, 1)}


@pytest.mark.parametrize("engine", ["compiled", "reference"])
def test_an_fsm_actor_keeps_its_last_state_changes_only(bus: Bus, engine: str) -> None:
    switch = Switch("switch", engine=engine)
    started(bus, switch)
    done = threading.Event()
    for event in ["flip", "stay", "flip", "flip", "stay", "flip"]:
        switch.post(switch.fsm_send, event)
    switch.post(done.set)
    assert done.wait(5)
    info = bus.inspect().actor("switch")
    assert info is not None and info.machine is not None
    machine = info.machine
    # four flips and the start changed the state; three are kept, oldest first
    assert (machine.state, machine.engine, machine.state_changes) == ("off", engine, 5)
    assert [(t.event, t.source, t.target) for t in machine.transitions] == [
        ("flip", "on", "off"),
        ("flip", "off", "on"),
        ("flip", "on", "off"),
    ]
    times = [t.time for t in machine.transitions]
    assert times == sorted(times)
    assert machine.diagram is None


class Relay(Machine):
    """``go`` leaves ``idle``; entering ``busy`` sends ``done`` from its action."""

    idle = State(initial=True)
    busy = State()
    go = idle.to(busy)
    done = busy.to(idle)


class RelayActor(FsmActor):
    machine = Relay

    def on_enter_busy(self) -> None:  # an entry action, by name
        self.fsm_send("done")


def test_the_compiled_engine_records_the_changes_of_queued_events_too(bus: Bus) -> None:
    relay = RelayActor("relay")
    started(bus, relay)
    done = threading.Event()
    relay.post(relay.fsm_send, "go")
    relay.post(done.set)
    assert done.wait(5)
    info = bus.inspect().actor("relay")
    assert info is not None and info.machine is not None
    assert [(t.event, t.source, t.target) for t in info.machine.transitions] == [
        ("<start>", "", "idle"),
        ("go", "idle", "busy"),
        ("done", "busy", "idle"),
    ]


def test_a_diagram_highlights_the_current_state(bus: Bus) -> None:
    switch = Switch("switch")
    started(bus, switch)
    info = bus.inspect(diagram="switch").actor("switch")
    assert info is not None and info.machine is not None
    assert info.machine.diagram is not None
    assert "class off current" in info.machine.diagram
    dot = bus.inspect(diagram="switch", diagram_format="dot").actor("switch")
    assert dot is not None and dot.machine is not None and dot.machine.diagram is not None
    assert dot.machine.diagram.startswith("digraph")
    with pytest.raises(UsageError, match=r"'svg'.*mermaid, dot"):
        bus.inspect(diagram="switch", diagram_format="svg")


def ask(asker: Bus) -> list[object]:
    return list(asker.request_all(InspectNode(SYSTEM_SUBJECT), 5.0, scope=Scope.REMOTE_ONLY))


def test_link_counters_after_traffic_and_the_snapshot_over_the_link(bus: Bus) -> None:
    service = bus.listen(0)
    with Bus(node_id="asker") as asker:
        link = asker.connect("127.0.0.1", service.port)
        assert link.wait_logged_on(5) == "inspected"
        inbox = bus.inbox(Tick, "/ticks")
        subscribed = threading.Event()
        feed = asker.publisher(
            Tick, "/ticks", on_status=lambda state, _: state is FeedState.UP and subscribed.set()
        )
        assert subscribed.wait(5)
        for n in range(20):
            feed.publish(Tick("/ticks", n=n))
        for _ in range(20):
            assert inbox.receive(5) is not None
        (mine,) = asker.inspect().links
        assert (mine.peer_node, mine.status, mine.initiator) == ("inspected", "logged on", True)
        assert mine.messages_out >= 20 and mine.bytes_out > 0
        (reply,) = ask(asker)
        assert isinstance(reply, NodeInspected)
        snap = reply.snapshot
        assert isinstance(snap, NodeSnapshot)
        assert snap.node == "inspected"
        (theirs,) = snap.links
        assert (theirs.peer_node, theirs.initiator) == ("asker", False)
        assert theirs.messages_in >= 20 and theirs.bytes_in > 0
        # the asker's request is the asker's: not outstanding on the node it asked
        assert snap.requests_outstanding == 0


def test_a_permissions_rule_on_its_key_refuses_inspection(bus: Bus) -> None:
    rules = Permissions.parse("deny request * actorbus.system actorbus.InspectNode\nallow * * *\n")
    service = bus.listen(0, permissions=rules)
    with Bus(node_id="asker") as asker:
        asker.connect("127.0.0.1", service.port).wait_logged_on(5)
        (reply,) = ask(asker)
        assert not isinstance(reply, NodeInspected)
        assert reply.status is ReplyStatus.ERROR  # type: ignore[attr-defined]


class Broken(Actor):
    def inspect_machine(self, diagram: str | None = None) -> None:
        raise RuntimeError("no view today")


def test_an_inspect_machine_that_raises_leaves_out_that_machine_only(
    bus: Bus, log_lines: list[str]
) -> None:
    started(bus, Broken("broken"))
    info = bus.inspect().actor("broken")
    assert info is not None and info.started and info.machine is None
    assert (
        "inspection: broken.inspect_machine() raised RuntimeError: no view today; "
        "its machine is left out"
    ) in log_lines


def test_inspect_on_a_closed_bus_says_so() -> None:
    bus = Bus()
    bus.close()
    with pytest.raises(UsageError, match="closed"):
        bus.inspect()
