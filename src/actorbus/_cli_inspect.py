"""``actorbus inspect HOST:PORT``: a running node's inside, over a link.

A throwaway bus dials the node's service (with the secret and TLS files given),
waits for the logon and sends one :class:`~actorbus.inspection.InspectNode`
request per view; the node answers with its
:class:`~actorbus.inspection.NodeSnapshot`, printed as tables (or JSON, or one
actor's machine diagram).  ``--watch`` keeps the link and redraws every few
seconds until Ctrl-C.

A node that cannot be inspected (refused dial, refused logon, no answer, an
actor it does not have) is one line on stderr and exit status 1
(:class:`InspectFailed`); bad arguments are the CLI's usual status 2.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from .bus.message import Field, ReplyStatus
from .bus.scope import Scope
from .bus.system import SYSTEM_SUBJECT
from .config import ConnectionSettings
from .errors import LinkClosedError, RequestError, UsageError
from .fsm.diagram import render_dot
from .inspection import InspectNode, NodeInspected, NodeSnapshot
from .node import Bus

__all__ = ["InspectFailed", "add_parser", "run"]

#: what ``--format`` may be; svg is drawn here from the node's DOT text
FORMATS = ("mermaid", "dot", "svg")
#: the screen is cleared and the cursor sent home before each ``--watch`` redraw
CLEAR = "\x1b[H\x1b[2J"


class InspectFailed(Exception):
    """The node could not be inspected: one line, exit status 1."""


def add_parser(sub: Any) -> None:
    """The ``inspect`` subcommand's arguments, on the CLI's subparsers."""
    p = sub.add_parser(
        "inspect",
        help="show a running node's actors, dispatchers, feeds, links, requests and machines",
    )
    p.add_argument("address", help="HOST:PORT of a node's service ([IPv6]:PORT for an IPv6 host)")
    p.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        help="seconds to wait for the logon, then for each answer (default 5)",
    )
    p.add_argument(
        "--node-id",
        default=None,
        help="the node id this command logs on as (default: a generated host-pid-random); "
        "the one the node's permissions and per-node secrets know",
    )
    p.add_argument(
        "--secret-file",
        type=Path,
        default=None,
        help="the secret the link proves (default: this user's, as the node's own links do)",
    )
    p.add_argument(
        "--auth",
        choices=("auto", "none"),
        default="auto",
        help="none: prove no secret (a node whose service has auth=none)",
    )
    p.add_argument("--tls-ca-file", type=Path, default=None, help="TLS: the service's CA (PEM)")
    p.add_argument("--tls-cert-file", type=Path, default=None, help="TLS: a client certificate")
    p.add_argument("--tls-key-file", type=Path, default=None, help="TLS: its private key")
    p.add_argument(
        "--tls-server-name", default=None, help="TLS: the name the service's certificate carries"
    )
    p.add_argument(
        "--watch",
        type=float,
        nargs="?",
        const=2.0,
        default=None,
        metavar="SECONDS",
        help="redraw every SECONDS (default 2) until Ctrl-C",
    )
    p.add_argument("--diagram", default=None, metavar="ACTOR", help="an FSM actor's diagram")
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="mermaid",
        help="the diagram's format (default mermaid; svg needs Graphviz's dot)",
    )
    p.add_argument("-o", "--output", type=Path, default=None, help="write the diagram there")
    p.add_argument("--json", action="store_true", help="print the snapshot as JSON")


def run(
    args: argparse.Namespace,
    address: tuple[str, int],
    bad_usage: Callable[[str], Exception],
    out: TextIO = sys.stdout,
) -> int:
    """Run ``actorbus inspect`` with parsed ``args`` at ``address`` (host,
    port); ``bad_usage(text)`` is the CLI's exception for a bad argument."""
    if not args.timeout > 0:  # (NaN too)
        raise bad_usage(f"--timeout {args.timeout}: expected seconds > 0")
    if args.watch is not None and not args.watch > 0:
        raise bad_usage(f"--watch {args.watch}: expected seconds > 0 between redraws")
    if args.diagram is None and (args.output is not None or args.format != "mermaid"):
        raise bad_usage("-o and --format go with --diagram ACTOR (the machine to draw)")
    if args.diagram is not None and (args.json or args.watch is not None):
        raise bad_usage("--diagram draws one machine once; leave out --json and --watch")
    settings = ConnectionSettings(
        connect_timeout=args.timeout,
        secret_file=args.secret_file,
        auth=args.auth,
        tls_ca_file=args.tls_ca_file,
        tls_cert_file=args.tls_cert_file,
        tls_key_file=args.tls_key_file,
        tls_server_name=args.tls_server_name,
    )
    host, port = address
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    # a failed dial or logon is reported by the link too: the one line below says it
    fallback = logging.getLogger("actorbus")
    was_disabled, fallback.disabled = fallback.disabled, True
    try:
        with Bus(node_id=args.node_id) as bus:  # None: a generated host-pid-random
            _log_on(bus, address, where, settings, args.timeout)
            if args.diagram is not None:
                _diagram(bus, where, args, out)
            elif args.watch is not None:
                _watch(bus, where, args, out)
            else:
                snap = ask(bus, where, args.timeout)
                out.write(_as_json(snap) if args.json else "\n".join(tables(snap)) + "\n")
    finally:
        fallback.disabled = was_disabled
    return 0


def _log_on(
    bus: Bus, address: tuple[str, int], where: str, settings: ConnectionSettings, timeout: float
) -> None:
    host, port = address
    link = bus.connect(host, port, settings=settings)
    try:
        link.wait_logged_on(timeout)
    except LinkClosedError:
        # the link's reason names the address and the fix (refused, wrong secret, ...)
        reason = link.last_reason or "the link closed before logging on"
        raise InspectFailed(
            f"inspect: no node at {where}: {reason}"
            if where not in reason
            else f"inspect: {reason}"
        ) from None
    except TimeoutError:
        raise InspectFailed(
            f"inspect: no node at {where} logged on within {timeout:g} s; start the node "
            f"there, check HOST:PORT (its service's port), or raise --timeout"
        ) from None


def ask(
    bus: Bus,
    where: str,
    timeout: float,
    diagram: str | None = None,
    diagram_format: str = "mermaid",
) -> NodeSnapshot:
    """The snapshot of the node ``bus`` is linked to (its only link)."""
    request = InspectNode(SYSTEM_SUBJECT, diagram=diagram, diagram_format=diagram_format)
    try:
        replies = bus.request_all(request, timeout, scope=Scope.REMOTE_ONLY)
    except RequestError:
        raise InspectFailed(
            f"inspect: the node at {where} takes no inspection requests: it runs a version "
            f"without inspection, or its permissions refuse this node's requests on "
            f"actorbus.InspectNode (docs/inspect.md)"
        ) from None
    for reply in replies:
        if isinstance(reply, NodeInspected) and reply.snapshot is not None:
            return reply.snapshot
    reasons = [r.reason for r in replies if r.status is ReplyStatus.ERROR and r.reason]
    reason = reasons[0] if reasons else "no snapshot in its answer"
    if "timed out" in reason:
        raise InspectFailed(
            f"inspect: the node at {where} did not answer within {timeout:g} s; it may be "
            f"overloaded or stopping: try again, or raise --timeout"
        )
    raise InspectFailed(
        f"inspect: the node at {where} could not be inspected: {reason}; its permissions "
        f"may refuse this node's requests on actorbus.InspectNode (docs/inspect.md)"
    )


# ------------------------------------------------------------------ views
def _watch(bus: Bus, where: str, args: argparse.Namespace, out: TextIO) -> None:
    stop = threading.Event()
    try:
        while True:
            snap = ask(bus, where, args.timeout)
            text = _as_json(snap) if args.json else "\n".join(tables(snap)) + "\n"
            out.write(CLEAR + text)
            out.flush()
            stop.wait(args.watch)  # Ctrl-C ends it
    except KeyboardInterrupt:
        return


def _diagram(bus: Bus, where: str, args: argparse.Namespace, out: TextIO) -> None:
    fmt = "dot" if args.format == "svg" else args.format
    snap = ask(bus, where, args.timeout, diagram=args.diagram, diagram_format=fmt)
    actor = snap.actor(args.diagram)
    if actor is None or actor.machine is None or actor.machine.diagram is None:
        fsm = [a.name for a in snap.actors if a.machine is not None]
        there = f"its FSM actors: {', '.join(fsm)}" if fsm else "it has no FSM actors"
        what = "no actor" if actor is None else "no state machine in actor"
        raise InspectFailed(
            f"inspect: node {snap.node} at {where} has {what} {args.diagram!r}; {there}"
        )
    text = actor.machine.diagram
    if args.format == "svg":
        try:
            text = str(render_dot(text, "svg"))
        except UsageError as exc:  # FsmError, GraphvizNotFoundError
            raise InspectFailed(f"inspect: {exc}") from None
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
    else:
        out.write(text if text.endswith("\n") else text + "\n")


def _json_value(value: object) -> object:
    if isinstance(value, Field):
        names = type(value).__field_names__
        return {name: _json_value(v) for name, v in zip(names, value, strict=True)}
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    return value


def _as_json(snap: NodeSnapshot) -> str:
    return json.dumps(_json_value(snap), indent=2) + "\n"


def _table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """A title line, then the header and one line per row, each column as wide
    as its widest cell; ``(none)`` for no rows."""
    if not rows:
        return [f"{title}: (none)", ""]
    cells = [list(header)] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [f"{title}:"]
    lines += [
        "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]
    return [*lines, ""]


def _clock(t: float) -> str:
    return datetime.datetime.fromtimestamp(t).strftime("%H:%M:%S.%f")[:-3]


def tables(snap: NodeSnapshot) -> list[str]:
    """The snapshot as readable tables, one line each."""
    lines = [f"node {snap.node} at {_clock(snap.time)}", ""]
    lines += _table(
        "actors",
        (
            "NAME",
            "CLASS",
            "DISPATCHER",
            "STARTED",
            "MAILBOX",
            "DEPTH",
            "MAX",
            "TASKS",
            "FAILURES",
            "OVERRUNS",
            "STATE",
        ),
        [
            (
                a.name,
                a.class_name,
                a.dispatcher,
                "yes" if a.started else "no",
                a.mailbox,
                a.depth,
                a.max_depth,
                a.tasks_run,
                a.failures,
                a.quantum_overruns,
                (a.machine.state or "-") if a.machine is not None else "",
            )
            for a in snap.actors
        ],
    )
    lines += _table(
        "dispatchers",
        ("NAME", "KIND", "THREADS", "RUN-QUEUE", "ACTORS", "TASKS", "FAILURES", "OVERRUNS"),
        [
            (
                d.name,
                d.kind,
                d.threads,
                d.run_queue,
                d.actors,
                d.tasks_run,
                d.failures,
                d.quantum_overruns,
            )
            for d in snap.dispatchers
        ],
    )
    lines += _table(
        "feeds",
        ("ROLE", "TYPE", "SUBJECT", "SCOPE", "QUEUE", "COUNT", "UP"),
        [
            (
                f.role,
                f.message_type,
                f.subject if f.wildcard is None else f"{f.subject} ({f.wildcard})",
                f.scope,
                f.queue or "-",
                f.count,
                f.up,
            )
            for f in snap.feeds
        ],
    )
    lines += _table(
        "links",
        (
            "NAME",
            "PEER",
            "ADDRESS",
            "STATUS",
            "MSGS-IN",
            "MSGS-OUT",
            "BYTES-IN",
            "BYTES-OUT",
            "DROPPED",
            "LOST",
            "RECONNECTS",
        ),
        [
            (
                k.name,
                k.peer_node or "-",
                k.address,
                k.status,
                k.messages_in,
                k.messages_out,
                k.bytes_in,
                k.bytes_out,
                k.dropped,
                k.lost,
                k.reconnects,
            )
            for k in snap.links
        ],
    )
    lines += _table(
        f"requests outstanding ({snap.requests_outstanding})",
        ("TYPE", "SUBJECT", "COUNT"),
        [(r.message_type, r.subject, r.count) for r in snap.requests],
    )
    machines = [a for a in snap.actors if a.machine is not None]
    lines += _table(
        "state machines",
        ("ACTOR", "STATE", "ENGINE", "CHANGES"),
        [
            (a.name, a.machine.state or "-", a.machine.engine, a.machine.state_changes)
            for a in machines
            if a.machine is not None
        ],
    )
    for a in machines:
        if a.machine is not None and a.machine.transitions:
            lines.append(f"last transitions of {a.name}:")
            lines += [
                f"  {_clock(t.time)}  {t.event}: {t.source or '-'} -> {t.target}"
                for t in a.machine.transitions
            ]
            lines.append("")
    return lines
