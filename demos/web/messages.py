"""The web demo's requests and replies (the data types are the calculator's)."""

from __future__ import annotations

from actorbus import Reply, Request


class StatsReply(Reply, type_name="demo.web.StatsReply"):
    """One line of the stats: a label and a number."""

    label: str
    value: float


class Stats(Request, type_name="demo.web.Stats", replies=(StatsReply,)):
    """The last ``last`` averages, one reply each (OK_CONTINUING), then their mean."""

    last: int = 5


class ControlReply(Reply, type_name="demo.web.ControlReply"):
    """The source's state after a control request: ``"running"`` or ``"stopped"``."""

    source: str


class Control(Request, type_name="demo.web.Control", replies=(ControlReply,)):
    """Stop or start the source: ``action`` is ``"stop"`` or ``"start"``."""

    action: str
