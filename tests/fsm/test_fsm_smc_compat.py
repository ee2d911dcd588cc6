"""Where ``.sm`` machines meet SMC's own rules: names SMC allows, ``%{ %}`` blocks, and
the behaviours docs/fsm.md compares with SMC's (one test each, on both engines).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from statemachine import State, StateMachine

from actorbus import Bus, FeedState, Notification
from actorbus.errors import FsmError, SmSyntaxError
from actorbus.fsm import (
    EventArgumentError,
    FsmActor,
    TransitionNotAllowed,
    load_sm,
    parse_sm,
    render,
)

from .conftest import MakeEngine


class Log:
    """A model that records what the machine's actions did."""

    def __init__(self) -> None:
        self.lines: list[Any] = []
        self.engine: Any = None

    def log(self, line: Any) -> None:
        self.lines.append(line)


# ------------------------------------------------------------ names SMC allows

NAMES_SM = """\
%start Lamp::Off
%map Lamp
%%
Off
{
    On          On      { log("On"); }
    send(state, event, source, target) [state > 0]
                nil     { log((state, event, source, target)); }
    name        nil     { log("name"); }
}
On
{
    Off         Off     { log("Off"); }
    id          nil     { log("id"); }
    events      nil     { log("events"); }
}
%%
"""


def test_events_named_like_states_or_statemachine_attributes(make: MakeEngine) -> None:
    machine = parse_sm(NAMES_SM)
    assert machine.spec.events == ("On", "send", "name", "Off", "id", "events")
    model = Log()
    engine = make(machine, model)
    engine.start()
    engine.send("name")
    engine.send("On")
    engine.send("id")
    engine.send("events")
    engine.send("Off")
    assert engine.current_state == "Off"
    assert model.lines == ["name", "On", "id", "events", "Off"]
    with pytest.raises(TransitionNotAllowed) as caught:
        engine.send("id")
    assert (caught.value.state, caught.value.event) == ("Off", "id")
    assert "Off --> On : On" in render(machine)


def test_parameters_named_like_injected_arguments(make: MakeEngine) -> None:
    model = Log()
    engine = make(parse_sm(NAMES_SM), model)
    engine.start()
    engine.send("send", state=2, event="e", source="s", target="t")
    assert model.lines == [(2, "e", "s", "t")]
    with pytest.raises(TransitionNotAllowed):
        engine.send("send", state=0, event="e", source="s", target="t")  # the guard is false
    with pytest.raises(EventArgumentError, match="argument 'state'"):
        engine.send("send", event="e", source="s", target="t")


# ------------------------------------------------------------ %{ ... %} blocks

HELPERS_SM = """\
%{
LIMIT = 2

def over(count):
    return count >= LIMIT

def restart():
    global LIMIT
    LIMIT += 1
    return 0
%}
%start Counter::Counting
%map Counter
%%
Counting
{
    tick [over(ctxt.count + 1)] Full    { log(("full", LIMIT)); }
    tick                        nil     { count = ctxt.count + 1; }
}
Full
{
    more                        Counting { count = restart(); log(over(0)); }
}
%%
"""


class Counter(Log):
    count = 0


def test_raw_source_blocks_define_helpers_for_guards_and_actions(make: MakeEngine) -> None:
    machine = parse_sm(HELPERS_SM)
    assert "def over(count):" in machine.raw_source[0]
    model = Counter()
    engine = make(machine, model)
    engine.start()
    engine.send("tick")
    engine.send("tick")
    assert engine.current_state == "Full"
    engine.send("more")  # a helper rebinds the block's global: guards see the new value
    for _ in range(3):
        engine.send("tick")
    assert engine.current_state == "Full"
    assert model.lines == [("full", 2), False, ("full", 3)]


def test_invalid_python_in_a_raw_source_block_is_a_syntax_error() -> None:
    text = "%{\nx = 1\ndef broken(:\n%}\n%start M::A\n%map M\n%%\nA { go A {} }\n%%\n"
    with pytest.raises(SmSyntaxError, match="'%{ ... %}' block") as caught:
        parse_sm(text, "blocks.sm")
    assert (caught.value.line, caught.value.column) == (3, 12)


def test_a_raw_source_block_that_raises_names_the_file_and_line() -> None:
    text = "// blocks\n%{\nimport actorbus_no_such_module\n%}\n%start M::A\n%map M\n%%\nA {}\n%%\n"
    with pytest.raises(FsmError, match=r"blocks\.sm:2: the '%\{ ... %\}' block raised") as caught:
        parse_sm(text, "blocks.sm")
    assert isinstance(caught.value.__cause__, ImportError)


# ------------------------------------------------------------ the engines agree


class Pay(StateMachine):
    Idle = State(initial=True)
    Paid = State(final=True)

    pay = Idle.to(Paid, on="charge")


class Till:
    def __init__(self) -> None:
        self.charged: list[int] = []

    def charge(self, amount: int) -> None:
        if amount < 0:
            raise TypeError(f"a negative amount: {amount}")
        self.charged.append(amount)


def test_a_missing_event_argument_is_the_same_error_on_both_engines(make: MakeEngine) -> None:
    engine = make(Pay, Till())
    engine.start()
    with pytest.raises(EventArgumentError) as caught:
        engine.send("pay")
    assert isinstance(caught.value, TypeError)
    assert "event 'pay' in state 'Idle'" in str(caught.value)
    assert "needs the event argument 'amount'" in str(caught.value)
    assert "call send('pay', amount=...)" in str(caught.value)
    assert engine.current_state == "Idle"
    # a TypeError of the action itself is the action's, unchanged
    with pytest.raises(TypeError, match="a negative amount") as own:
        engine.send("pay", amount=-1)
    assert not isinstance(own.value, EventArgumentError)


START_SM = """\
%start Door::Closed
%map Door
%%
Closed
    Entry { log("enter Closed"); check(); }
{
    open    Opened  {}
}
Opened { close Closed {} }
%%
"""


class Checked(Log):
    fail = True

    def check(self) -> None:
        if self.fail:
            raise RuntimeError("the sensor is unplugged")


def test_a_start_whose_entry_raises_leaves_the_machine_not_started(make: MakeEngine) -> None:
    model = Checked()
    engine = make(parse_sm(START_SM), model)
    with pytest.raises(RuntimeError, match="unplugged"):
        engine.start()
    assert not engine.started
    with pytest.raises(FsmError, match="not started; call start"):
        _ = engine.current_state
    with pytest.raises(FsmError, match="before start"):
        engine.send("open")
    assert set(vars(model)) == {"lines", "engine"}  # no state left on the model either
    model.fail = False
    engine.start()  # a second start runs the entry actions again
    assert engine.current_state == "Closed"
    engine.send("open")
    assert engine.current_state == "Opened"
    assert model.lines == ["enter Closed", "enter Closed"]


# ------------------------------------------------------------ decided differences

DEFAULT_SM = """\
%start Phone::Idle
%map Phone
%%
Idle    { ring  Ringing { log("ring"); } }
Ringing { hang  Idle    { log("hang"); } }
Default { Default nil { log("ignored"); } }
%%
"""


def test_default_answers_only_the_events_the_file_declares(make: MakeEngine) -> None:
    model = Log()
    engine = make(parse_sm(DEFAULT_SM), model)
    engine.start()
    engine.send("hang")  # declared (in Ringing): Idle's Default transition answers it
    assert model.lines == ["ignored"]
    with pytest.raises(TransitionNotAllowed, match="declares no transition of that name") as caught:
        engine.send("dial")  # SMC generates no method for it: the call fails there too
    assert (caught.value.state, caught.value.event) == ("Idle", "dial")
    assert engine.current_state == "Idle"
    assert model.lines == ["ignored"]


FAILING_SM = """\
%start Valve::Shut
%map Valve
%%
Shut
    Exit { log("exit Shut"); }
{
    open                Opening { log("open"); fail("open"); }
}
Opening
    Entry { log("enter Opening"); fail("enter"); }
{
    done                Shut    {}
}
%%
"""


class Failing(Log):
    def __init__(self, *failing: str) -> None:
        super().__init__()
        self.failing = set(failing)

    def fail(self, where: str) -> None:
        if where in self.failing:
            raise RuntimeError(where)


@pytest.mark.parametrize("failing", ["open", "enter"])
def test_a_failing_transition_or_entry_action_rolls_back(make: MakeEngine, failing: str) -> None:
    """SMC would be in Opening (its 'finally' sets the target); by default actorbus is
    back in Shut."""
    model = Failing(failing)
    engine = make(parse_sm(FAILING_SM), model)
    engine.start()
    with pytest.raises(RuntimeError, match=failing):
        engine.send("open")
    assert engine.current_state == "Shut"
    expected = ["exit Shut", "open"] + (["enter Opening"] if failing == "enter" else [])
    assert model.lines == expected


@pytest.mark.parametrize("failing", [("open",), ("enter",), ("open", "enter"), ()])
def test_commit_on_error_enters_the_target_as_smc_does(
    make: MakeEngine, failing: tuple[str, ...]
) -> None:
    model = Failing(*failing)
    engine = make(parse_sm(FAILING_SM, commit_on_error=True), model)
    engine.start()
    if failing:
        with pytest.raises(RuntimeError) as caught:
            engine.send("open")
        assert str(caught.value) == failing[-1]  # the entry's, as from SMC's 'finally'
        if len(failing) == 2:
            assert str(caught.value.__context__) == "open"
    else:
        engine.send("open")
    assert engine.current_state == "Opening"
    assert model.lines == ["exit Shut", "open", "enter Opening"]  # entry runs after all
    engine.send("done")  # the machine goes on from the target
    assert engine.current_state == "Shut"


def test_commit_on_error_keeps_loopbacks_and_the_start_as_they_are(make: MakeEngine) -> None:
    text = START_SM.replace("Opened { close Closed {} }", "Opened { close nil { check(); } }")
    model = Checked()
    engine = make(parse_sm(text, commit_on_error=True), model)
    with pytest.raises(RuntimeError, match="unplugged"):
        engine.start()  # no state to commit to: not started, as without the option
    assert not engine.started
    model.fail = False
    engine.start()
    engine.send("open")
    model.fail = True
    with pytest.raises(RuntimeError, match="unplugged"):
        engine.send("close")  # nil: the state does not change either way
    assert engine.current_state == "Opened"


def test_load_sm_caches_each_rule_apart(tmp_path: Path) -> None:
    path = tmp_path / "valve.sm"
    path.write_text(FAILING_SM, encoding="utf-8")
    assert not load_sm(path).commit_on_error
    committing = load_sm(path, commit_on_error=True)
    assert committing.commit_on_error
    assert load_sm(path, commit_on_error=True) is committing


ENTRY_SEND_SM = """\
%start Boot::Off
%map Boot
%%
Off     { power Booting { log("power"); } }
Booting
    Entry { log("enter Booting"); ctxt.engine.send("ready"); log("entry done"); }
{
    ready   Running { log("ready"); }
}
Running
    Entry { log("enter Running"); }
{
    power   Off     {}
}
%%
"""


def test_an_event_sent_from_an_entry_action_runs_after_the_transition(
    make: MakeEngine,
) -> None:
    """SMC runs it at once, inside the entry action; actorbus queues it (run to completion)."""
    model = Log()
    engine = make(parse_sm(ENTRY_SEND_SM), model)
    model.engine = engine
    engine.start()
    engine.send("power")
    assert engine.current_state == "Running"
    assert model.lines == ["power", "enter Booting", "entry done", "ready", "enter Running"]


def test_extra_event_arguments_are_ignored(make: MakeEngine) -> None:
    """SMC's generated method would raise TypeError; actorbus passes what each declares."""
    model = Log()
    engine = make(parse_sm(NAMES_SM), model)
    engine.start()
    engine.send("On", brightness=80, feed=None)
    engine.send("Off", brightness=0)
    assert model.lines == ["On", "Off"]


# ------------------------------------------------------------ on an actor

WATCH_SM = """\
%start Watch::Waiting
%map Watch
%%
Waiting { feed_up(state)    Watching    { seen(state); } }
Watching { feed_down(state) Waiting     { seen(state); } }
%%
"""


class Tick(Notification, type_name="test.fsm_smc_compat.Tick"):
    n: int


class Watcher(FsmActor):
    """Its machine's ``feed_up(state)`` gets the feed state the actor's callback passes."""

    def __init__(self, engine: str) -> None:
        super().__init__("watcher", machine=parse_sm(WATCH_SM), engine=engine)
        self.states: list[FeedState] = []
        self.changed = threading.Event()
        self.ticks: Any = None

    def startup(self) -> None:
        super().startup()
        self.ticks = self.subscribe(Tick, "/watch")  # no callable: feed_up / feed_down

    def seen(self, state: FeedState) -> None:
        self.states.append(state)
        self.changed.set()

    def shutdown(self) -> None:
        self.ticks.close()
        super().shutdown()


@pytest.mark.parametrize("engine", ["compiled", "reference"])
def test_a_parameter_named_state_gets_the_actors_argument(engine: str) -> None:
    with Bus() as bus:
        watcher = Watcher(engine)
        bus.register(watcher)
        bus.startup(watcher).wait(5)
        publisher = bus.publisher(Tick, "/watch")
        assert watcher.changed.wait(5)
        publisher.close()
        bus.shutdown(watcher).wait(5)
    assert watcher.states[0] is FeedState.UP
