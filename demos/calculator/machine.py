"""The calculator's machine declared in Python — the twin of ``calculator.sm``.

Both declarations run through the same engines; a test feeds the same scripted
events through both and compares the averages and the state sequences.
"""

from __future__ import annotations

from statemachine import State

from actorbus.fsm import DefaultState, Machine


class CalculatorMachine(Machine):
    """Initializing → Collecting → Publishing, FeedDown from anywhere, Shutdown final."""

    Initializing = State(initial=True, enter="open_feeds")
    FeedDown = State(enter=["mark_average_down", "clear_window"])
    Collecting = State()
    Publishing = State(enter=["mark_average_up", "publish_average"])
    Shutdown = State(final=True, enter="close_feeds")
    Default = DefaultState()

    feed_up = (
        Initializing.to(Collecting) | FeedDown.to(Collecting) | Default.to.itself(internal=True)
    )
    data = (
        Collecting.to(Publishing, cond="window_full_after", on="add")
        | Collecting.to.itself(internal=True, on="add")
        | Publishing.to.itself(internal=True, on=["add", "publish_average"])
        | Default.to.itself(internal=True)
    )
    feed_down = Default.to(FeedDown)
    shutdown = Default.to(Shutdown)
