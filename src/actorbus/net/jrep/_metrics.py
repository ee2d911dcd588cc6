"""``/metrics``: the node's counters in Prometheus' text format, read at scrape time.

Theory of operation.  Nothing is counted for Prometheus: every number already
exists (the node's snapshot — ``Bus.inspect()``: its actors' mailboxes, its
dispatchers, its feed rows, its links' counters, its outstanding requests — and
the gateways' counters), and a scrape reads them through the node's
:class:`~._views.NodeViews` into metric families, which ``prometheus_client``
writes in the text exposition format.  The publish and delivery paths stay as
they are whether metrics are on or off; a scrape costs one snapshot.  The one
thing measured for metrics is a request's duration: a gateway serving metrics
turns the router's request timing on when it is made (``NodeViews.time_requests``;
bus/history.py says what it costs).

``prometheus_client`` is imported only when a gateway serves metrics
(:func:`check_available` at open), so a node without the ``metrics`` extra runs
as before.

Label cardinality is bounded: the mailbox depths of at most ``MAX_SERIES``
actors (the deepest first; every actor counts in the per-dispatcher total), the
states of at most ``MAX_SERIES`` feed rows and the outstanding requests of at
most ``MAX_SERIES`` keys; ``actorbus_series_unlisted`` says how many were left
out.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError
from ._views import MAX_SERIES, NodeViews

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

    from ...bus.history import RequestLatencies

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
        #: the durations of the node's requests (their timing starts now)
        self.latencies = views.time_requests() if views.time_requests is not None else None
        self._registry: CollectorRegistry | None = None

    def render(self) -> bytes:
        """The exposition text of every metric, read now."""
        from prometheus_client import exposition, registry

        if self._registry is None:
            self._registry = registry.CollectorRegistry(auto_describe=False)
            self._registry.register(_Collector(self.views, self.latencies))
        return exposition.generate_latest(self._registry)


class _Collector:
    """A custom collector: ``collect()`` takes a snapshot and yields families."""

    def __init__(self, views: NodeViews, latencies: RequestLatencies | None) -> None:
        self.views = views
        self.latencies = latencies

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        views = self.views
        shot = views.snapshot()
        node = shot.node
        unlisted = GaugeMetricFamily(
            "actorbus_series_unlisted",
            "Actors, feed rows or request keys left out of a labelled metric (over its bound)",
            labels=["node", "metric"],
        )

        # -- links
        link_labels = ["node", "link", "peer"]
        messages = CounterMetricFamily(
            "actorbus_link_messages",
            "Data messages written to / read from a link's socket",
            labels=[*link_labels, "direction"],
        )
        traffic = CounterMetricFamily(
            "actorbus_link_bytes",
            "Bytes written to / read from a link's socket",
            labels=[*link_labels, "direction"],
        )
        dropped = CounterMetricFamily(
            "actorbus_link_dropped",
            "Data messages that never reached a link's socket",
            labels=link_labels,
        )
        lost = CounterMetricFamily(
            "actorbus_link_lost",
            "Data messages written to a connection that broke, never read by the peer",
            labels=link_labels,
        )
        logged_on = GaugeMetricFamily(
            "actorbus_link_logged_on", "1 while a link is logged on", labels=link_labels
        )
        for link in shot.links:
            labels = [node, link.name, link.peer_node]
            messages.add_metric([*labels, "out"], link.messages_out)
            messages.add_metric([*labels, "in"], link.messages_in)
            traffic.add_metric([*labels, "out"], link.bytes_out)
            traffic.add_metric([*labels, "in"], link.bytes_in)
            dropped.add_metric(labels, link.dropped)
            lost.add_metric(labels, link.lost)
            logged_on.add_metric(labels, 1 if link.status == "logged on" else 0)
        yield from (messages, traffic, dropped, lost, logged_on)

        # -- dispatchers and mailboxes
        tasks = CounterMetricFamily(
            "actorbus_dispatcher_tasks",
            "Tasks a dispatcher ran (deliveries, timers, startups; failed ones included)",
            labels=["node", "dispatcher"],
        )
        failures = CounterMetricFamily(
            "actorbus_dispatcher_task_failures", "Tasks that raised", labels=["node", "dispatcher"]
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
        per_dispatcher: dict[str, int] = {}
        for actor in shot.actors:
            per_dispatcher[actor.dispatcher] = per_dispatcher.get(actor.dispatcher, 0) + actor.depth
        for d in sorted(shot.dispatchers, key=lambda d: d.name):
            tasks.add_metric([node, d.name], d.tasks_run)
            failures.add_metric([node, d.name], d.failures)
            overruns.add_metric([node, d.name], d.quantum_overruns)
            run_queue.add_metric([node, d.name], d.run_queue)
            queued.add_metric([node, d.name], per_dispatcher.get(d.name, 0))
        yield from (tasks, failures, overruns, run_queue, queued)
        depth = GaugeMetricFamily(
            "actorbus_mailbox_depth",
            f"Tasks queued in an actor's mailbox (the {MAX_SERIES} deepest actors)",
            labels=["node", "actor", "dispatcher"],
        )
        deepest = sorted(shot.actors, key=lambda a: (-a.depth, a.name))
        for actor in deepest[:MAX_SERIES]:
            depth.add_metric([node, actor.name, actor.dispatcher], actor.depth)
        unlisted.add_metric([node, "actorbus_mailbox_depth"], max(0, len(deepest) - MAX_SERIES))
        yield depth

        # -- feeds
        feeds = GaugeMetricFamily(
            "actorbus_feed_up",
            f"1 when a feed row (key, role, scope, group) has an UP feed, else 0 (at most "
            f"{MAX_SERIES} rows)",
            labels=["node", "type", "subject", "role", "scope"],
        )
        for row in shot.feeds[:MAX_SERIES]:
            feeds.add_metric(
                [node, row.message_type, row.subject, row.role, row.scope], 1 if row.up else 0
            )
        unlisted.add_metric([node, "actorbus_feed_up"], max(0, len(shot.feeds) - MAX_SERIES))
        yield feeds

        # -- requests
        outstanding = GaugeMetricFamily(
            "actorbus_requests_outstanding",
            "Requests of this node waiting for replies",
            labels=["node"],
        )
        outstanding.add_metric([node], shot.requests_outstanding)
        per_key = GaugeMetricFamily(
            "actorbus_requests_outstanding_by_key",
            f"Requests waiting for replies, per key (at most {MAX_SERIES} keys)",
            labels=["node", "type", "subject"],
        )
        for count in shot.requests[:MAX_SERIES]:
            per_key.add_metric([node, count.message_type, count.subject], count.count)
        unlisted.add_metric(
            [node, "actorbus_requests_outstanding_by_key"], max(0, len(shot.requests) - MAX_SERIES)
        )
        yield from (outstanding, per_key)
        if self.latencies is not None:
            buckets, _, total = self.latencies.read()
            duration = HistogramMetricFamily(
                "actorbus_request_duration_seconds",
                "Time from a request's dispatch to its end (last final reply, cancel, timeout)",
                labels=["node"],
            )
            duration.add_metric([node], [(_bound(b), n) for b, n in buckets], sum_value=total)
            yield duration

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


def _bound(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)
