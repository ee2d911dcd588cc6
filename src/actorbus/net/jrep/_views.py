"""What a gateway's ``/inspect`` and ``/metrics`` read: the node's views, handed in.

The net layer may not import the node, the actors or the router, so the node,
which assembles them, hands the gateway a :class:`NodeViews`: callables
returning the node's snapshot (``Bus.inspect()``, an
:class:`~actorbus.inspection.NodeSnapshot`), one FSM actor's diagram as DOT
text, and each key's recent UP/DOWN changes
(:class:`~actorbus.bus.feed_history.FeedHistory`).  Nothing here runs per
message: every view is read when a page or a scraper asks.

:func:`view_json` is what ``/inspect.json`` answers (the snapshot's records as
JSON objects, field by field, plus the feed history); :class:`SvgDiagrams`
draws a diagram's DOT text as SVG with Graphviz's ``dot``, on the event loop
(a subprocess, awaited) and cached by text, since a machine has a handful of
states and the page asks again only when the state changed.
"""

from __future__ import annotations

import asyncio
import shutil
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ...bus.message import Field
from ...bus.system import SYSTEM_SUBJECT

if TYPE_CHECKING:
    from ...bus.history import FeedChange, RequestLatencies
    from ...bus.message import MessageKey
    from ...inspection import NodeSnapshot
    from ._settings import GatewayStats

__all__ = ["MAX_SERIES", "NodeViews", "SvgDiagrams", "view_json"]

#: the most actors, feed rows or request keys one scrape lists (beyond it: counted, not listed)
MAX_SERIES: Final = 1_000
#: SVG drawings kept, by DOT text
_SVG_CACHE: Final = 64
#: the longest a drawing may take, seconds
_DOT_TIMEOUT: Final = 10.0


def _no_history() -> dict[MessageKey, tuple[FeedChange, ...]]:
    return {}


def _no_diagram(actor: str) -> None:
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeViews:
    """The node's views, each read by a call when asked (see the module docstring)."""

    #: the node's id
    node_id: str
    #: the node's snapshot now (``Bus.inspect``)
    snapshot: Callable[[], NodeSnapshot]
    #: an actor's machine diagram as DOT text, its current state highlighted
    #: (None: no such actor, or no machine)
    diagram: Callable[[str], str | None] = _no_diagram
    #: each key's last UP/DOWN changes, oldest first
    feed_history: Callable[[], Mapping[MessageKey, tuple[FeedChange, ...]]] = _no_history
    #: turns the timing of requests on (once; a gateway serving metrics calls
    #: it when it is made) and returns their durations
    time_requests: Callable[[], RequestLatencies] | None = None
    #: the gateways' counters, by name (the net side fills it in)
    gateways: Callable[[], Mapping[str, GatewayStats]] = field(default=dict)


def view_json(views: NodeViews) -> dict[str, Any]:
    """What ``/inspect.json`` answers: the snapshot's fields as JSON values, and
    ``feed_history``: one object per key with its changes (time, up), the system
    subject's keys left out."""
    out: dict[str, Any] = as_json(views.snapshot())
    out["feed_history"] = [
        {
            "type": key.message_class.__type_name__,
            "subject": key.subject,
            "changes": [{"time": c.time, "up": c.up} for c in changes],
        }
        for key, changes in views.feed_history().items()
        if key.subject != SYSTEM_SUBJECT  # the node's own, hidden as discovery hides them
    ]
    return out


def as_json(value: Any) -> Any:
    """A snapshot's value as JSON: a record as an object of its fields, a tuple as an
    array; strings, numbers, booleans and None as they are."""
    if isinstance(value, Field):
        return {spec.name: as_json(v) for spec, v in zip(value.__fields__, value, strict=True)}
    if isinstance(value, tuple):
        return [as_json(v) for v in value]
    return value


class SvgDiagrams:
    """DOT text -> SVG with Graphviz's ``dot``, cached (see the module docstring)."""

    def __init__(self) -> None:
        self._drawn: OrderedDict[str, bytes] = OrderedDict()

    @staticmethod
    def available() -> bool:
        """True when ``dot`` is on PATH (else the page shows the DOT text)."""
        return shutil.which("dot") is not None

    async def draw(self, dot: str) -> bytes | None:
        """(loop) The SVG of ``dot``; None when Graphviz is missing or fails."""
        drawn = self._drawn.get(dot)
        if drawn is not None:
            self._drawn.move_to_end(dot)
            return drawn
        executable = shutil.which("dot")
        if executable is None:
            return None
        process = await asyncio.create_subprocess_exec(
            executable,
            "-Tsvg",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            async with asyncio.timeout(_DOT_TIMEOUT):
                svg, _ = await process.communicate(dot.encode("utf-8"))
        except TimeoutError:
            process.kill()
            await process.wait()
            return None
        if process.returncode != 0:
            return None
        self._drawn[dot] = svg
        if len(self._drawn) > _SVG_CACHE:
            self._drawn.popitem(last=False)
        return svg
