"""``/metrics``: the node's counters in Prometheus' text format, read at scrape time.

Theory of operation.  Nothing is counted for Prometheus: every number already
exists (a link's :class:`~actorbus.net.LinkStats`, a dispatcher's stats, the
router's feed rows, a gateway's counters), and a scrape reads them through the
node's :class:`~._views.NodeViews` into metric families, which
``prometheus_client`` writes in the text exposition format.  The publish and
delivery paths stay as they are whether metrics are on or off; a scrape costs
one read of each view.

``prometheus_client`` is imported only when a gateway serves metrics
(:func:`check_available` at open), so a node without the ``metrics`` extra runs
as before.

Label cardinality is bounded: the mailbox depths of at most ``MAX_SERIES``
actors (the deepest first; every actor counts in the per-dispatcher total), and
the states of at most ``MAX_SERIES`` feed rows; ``actorbus_series_unlisted``
says how many were left out.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError
from ._views import MAX_SERIES, NodeViews

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

__all__ = ["CONTENT_TYPE", "Exposition", "check_available"]

#: the text exposition format's media type
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def check_available(gateway: str, key: str | None) -> None:
    """Raise ConfigError when ``prometheus_client`` is not installed."""
    if importlib.util.find_spec("prometheus_client") is None:
        raise ConfigError(
            f"jrep gateway {gateway!r}: metrics are on but prometheus_client is not "
            "installed; install the extra (pip install 'actorbus[metrics]') or turn "
            "metrics off",
            key=key,
        )


class Exposition:
    """The metrics of one node, collected at each :meth:`render`."""

    def __init__(self, views: NodeViews) -> None:
        self.views = views
        self._registry: CollectorRegistry | None = None

    def render(self) -> bytes:
        """The exposition text of every metric, read now."""
        from prometheus_client import exposition, registry

        if self._registry is None:
            self._registry = registry.CollectorRegistry(auto_describe=False)
            self._registry.register(_Collector(self.views))
        return exposition.generate_latest(self._registry)


class _Collector:
    """A custom collector: ``collect()`` reads the views and yields families."""

    def __init__(self, views: NodeViews) -> None:
        self.views = views

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        views = self.views
        node = views.node_id
        unlisted = GaugeMetricFamily(
            "actorbus_series_unlisted",
            "Actors or feed rows left out of a labelled metric (over its series bound)",
            labels=["node", "metric"],
        )

        # -- links
        messages = CounterMetricFamily(
            "actorbus_link_messages",
            "Data messages written to / read from a link's socket",
            labels=["node", "link", "peer", "direction"],
        )
        traffic = CounterMetricFamily(
            "actorbus_link_bytes",
            "Bytes written to / read from a link's socket",
            labels=["node", "link", "peer", "direction"],
        )
        dropped = CounterMetricFamily(
            "actorbus_link_dropped",
            "Data messages that never reached a link's socket",
            labels=["node", "link", "peer"],
        )
        lost = CounterMetricFamily(
            "actorbus_link_lost",
            "Data messages written to a connection that broke, never read by the peer",
            labels=["node", "link", "peer"],
        )
        logged_on = GaugeMetricFamily(
            "actorbus_link_logged_on",
            "1 while a link is logged on",
            labels=["node", "link", "peer"],
        )
        for link in views.links():
            c = link.counters
            labels = [node, link.name, link.peer_node or ""]
            messages.add_metric([*labels, "out"], c.messages_out)
            messages.add_metric([*labels, "in"], c.messages_in)
            traffic.add_metric([*labels, "out"], c.bytes_out)
            traffic.add_metric([*labels, "in"], c.bytes_in)
            dropped.add_metric(labels, c.dropped)
            lost.add_metric(labels, c.lost)
            logged_on.add_metric(labels, 1 if link.is_logged_on else 0)
        yield from (messages, traffic, dropped, lost, logged_on)

        # -- dispatchers and mailboxes
        tasks = CounterMetricFamily(
            "actorbus_dispatcher_tasks",
            "Tasks a dispatcher ran (deliveries, timers, startups; failed ones included)",
            labels=["node", "dispatcher"],
        )
        failures = CounterMetricFamily(
            "actorbus_dispatcher_task_failures",
            "Tasks that raised",
            labels=["node", "dispatcher"],
        )
        overruns = CounterMetricFamily(
            "actorbus_dispatcher_quantum_overruns",
            "Times a mailbox went back on the run queue because its quantum ran out",
            labels=["node", "dispatcher"],
        )
        run_queue = GaugeMetricFamily(
            "actorbus_dispatcher_run_queue",
            "Mailboxes waiting on a dispatcher's run queue",
            labels=["node", "dispatcher"],
        )
        queued = GaugeMetricFamily(
            "actorbus_dispatcher_queued_tasks",
            "Tasks queued in the mailboxes of a dispatcher's actors, all of them",
            labels=["node", "dispatcher"],
        )
        depths: list[tuple[int, str, str]] = []
        for name, stats in sorted(views.dispatchers().items()):
            tasks.add_metric([node, name], stats.tasks_run)
            failures.add_metric([node, name], stats.task_failures)
            overruns.add_metric([node, name], stats.quantum_overruns)
            run_queue.add_metric([node, name], stats.run_queue_length)
            queued.add_metric([node, name], sum(m.depth for m in stats.mailboxes))
            depths.extend((m.depth, m.actor, name) for m in stats.mailboxes)
        yield from (tasks, failures, overruns, run_queue, queued)
        depth = GaugeMetricFamily(
            "actorbus_mailbox_depth",
            f"Tasks queued in an actor's mailbox (the {MAX_SERIES} deepest actors)",
            labels=["node", "actor", "dispatcher"],
        )
        depths.sort(key=lambda row: (-row[0], row[1]))
        for n, actor, dispatcher in depths[:MAX_SERIES]:
            depth.add_metric([node, actor, dispatcher], n)
        unlisted.add_metric([node, "actorbus_mailbox_depth"], max(0, len(depths) - MAX_SERIES))
        yield depth

        # -- feeds and requests
        feeds = GaugeMetricFamily(
            "actorbus_feed_up",
            f"1 when a feed row (key, role, scope, group) has an UP feed, else 0 (at most "
            f"{MAX_SERIES} rows)",
            labels=["node", "type", "subject", "role", "scope"],
        )
        rows = 0
        for topic in views.topics():
            rows += 1
            if rows <= MAX_SERIES:
                feeds.add_metric(
                    [node, topic.message_type, topic.subject, topic.role, topic.scope],
                    1 if topic.up else 0,
                )
        unlisted.add_metric([node, "actorbus_feed_up"], max(0, rows - MAX_SERIES))
        yield feeds
        outstanding = GaugeMetricFamily(
            "actorbus_requests_outstanding",
            "Requests of this node waiting for replies",
            labels=["node"],
        )
        outstanding.add_metric([node], views.outstanding_requests())
        yield outstanding

        # -- gateways
        sessions = GaugeMetricFamily(
            "actorbus_gateway_sessions", "J.REP sessions open now", labels=["node", "gateway"]
        )
        carried = CounterMetricFamily(
            "actorbus_gateway_messages",
            "J.REP messages received from / sent to a gateway's clients",
            labels=["node", "gateway", "direction"],
        )
        for name, g in sorted(views.gateways().items()):
            sessions.add_metric([node, name], g.open_sessions)
            carried.add_metric([node, name, "in"], g.received)
            carried.add_metric([node, name, "out"], g.sent)
        yield from (sessions, carried, unlisted)
