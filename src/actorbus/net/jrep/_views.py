"""What a gateway's ``/inspect`` and ``/metrics`` read: the node's views, handed in.

The net layer may not import the actors or the router, so the node, which
assembles them, hands the gateway a :class:`NodeViews`: plain callables that
read counters the node already keeps (a dispatcher's stats, the router's feed
rows, the links' counters).  Nothing here runs per message: every view is read
when a page or a scraper asks, and costs the node nothing in between.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ...actors import DispatcherStats
    from ...bus.discovery import Topic
    from ..link import Link
    from ._settings import GatewayStats

__all__ = ["MAX_SERIES", "NodeViews", "view_json"]

#: the most actors, or feed keys, one scrape or one page lists (beyond it: counted, not listed)
MAX_SERIES: Final = 1_000


def _none() -> tuple[()]:
    return ()


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeViews:
    """The node's counters, each read by a call when asked (see the module docstring)."""

    #: the node's id
    node_id: str
    #: every dispatcher's stats, by name (their mailboxes included)
    dispatchers: Callable[[], Mapping[str, DispatcherStats]] = field(default=dict)
    #: the node's feed rows, one per key, role, scope and group
    topics: Callable[[], Iterable[Topic]] = field(default=_none)
    #: the node's TCP links
    links: Callable[[], Iterable[Link]] = field(default=_none)
    #: the requests waiting for replies now
    outstanding_requests: Callable[[], int] = field(default=lambda: 0)
    #: the gateways' counters, by name
    gateways: Callable[[], Mapping[str, GatewayStats]] = field(default=dict)


def view_json(views: NodeViews) -> dict[str, Any]:
    """What ``/inspect.json`` answers: the node's dispatchers, actors, feeds and links
    as JSON values (the page's tables)."""
    dispatchers: list[dict[str, Any]] = []
    actors: list[dict[str, Any]] = []
    for name, stats in sorted(views.dispatchers().items()):
        dispatchers.append(
            {
                "name": name,
                "kind": stats.kind.value,
                "threads": stats.thread_count,
                "tasks_run": stats.tasks_run,
                "failures": stats.task_failures,
                "overruns": stats.quantum_overruns,
                "run_queue": stats.run_queue_length,
            }
        )
        for mailbox in stats.mailboxes:
            if len(actors) < MAX_SERIES:
                actors.append(
                    {
                        "name": mailbox.actor,
                        "dispatcher": name,
                        "state": mailbox.state,
                        "depth": mailbox.depth,
                        "max_depth": mailbox.max_depth,
                    }
                )
    feeds = [
        {
            "type": topic.message_type,
            "subject": topic.subject,
            "role": topic.role,
            "scope": topic.scope,
            "count": topic.count,
            "up": topic.up,
            "state": "UP" if topic.up else "DOWN",
        }
        for topic in _limited(views.topics())
    ]
    links: list[dict[str, Any]] = []
    for link in views.links():
        c = link.counters
        links.append(
            {
                "name": link.name,
                "peer": link.peer_node,
                "status": link.status.name,
                "messages_out": c.messages_out,
                "messages_in": c.messages_in,
                "bytes_out": c.bytes_out,
                "bytes_in": c.bytes_in,
                "dropped": c.dropped,
                "lost": c.lost,
            }
        )
    return {
        "node": views.node_id,
        "dispatchers": dispatchers,
        "actors": actors,
        "feeds": feeds,
        "links": links,
        "outstanding_requests": views.outstanding_requests(),
    }


def _limited(topics: Iterable[Topic]) -> list[Topic]:
    rows: list[Topic] = []
    for topic in topics:
        if len(rows) == MAX_SERIES:
            break
        rows.append(topic)
    return rows
