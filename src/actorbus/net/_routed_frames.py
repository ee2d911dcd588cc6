"""Checking a received ROUTED frame (a source-routed message, bus/routed.py): its
shape and fields, into the :class:`~actorbus.bus.routed.RoutedFrame` the bus's
source routes take.  The body stays bytes: a node that passes the message on
never decodes it."""

from __future__ import annotations

from typing import Any, Final

from ..bus.routed import (
    KIND_NOTIFY,
    KINDS,
    MAX_ROUTE,
    RoutedFrame,
    bodies_of,
    joins,
    with_bodies,
)
from ..config.schema import node_id_problem
from ._framing import Reject
from ._protocol_base import check_length, show

__all__ = ["ROUTED_IDS_KEPT", "RUN_MAX", "join_pending", "routed_frame", "with_bodies"]

#: node ids of ROUTED frames a link remembers as checked
ROUTED_IDS_KEPT: Final = 4_096
#: most notifications one ROUTED frame carries (as NOTIFY_RUN's)
RUN_MAX: Final = 1_024
_MALFORMED: Final = "malformed ROUTED frame"


def _malformed(detail: str) -> Reject:
    return Reject(f"{_MALFORMED}: {detail}", _MALFORMED)


def routed_frame(frame: tuple[object, ...], seen: set[str], longest: int) -> RoutedFrame:
    """The frame ``[32, seq, kind, route_to, route_from, type_name, subject,
    request_id, repliers, body]`` checked (not its ``seq``), or Reject /
    OverLimit.  ``seen``: the node ids already checked on this link (those of
    this frame are added, up to ``ROUTED_IDS_KEPT``); ``longest``: the link's
    ``max_subject_length``."""
    if len(frame) != 10:
        raise _malformed(f"{len(frame)} elements, expected 10")
    kind, route_to, route_from, type_name, subject, request_id, repliers, body = frame[2:]
    if type(kind) is not int or kind not in KINDS:
        raise _malformed(f"kind is {show(kind)}, expected one of {KINDS}")
    if type(route_to) is not tuple or type(route_from) is not tuple or not route_from:
        raise _malformed("route_to and route_from must be arrays, route_from not empty")
    if len(route_to) > MAX_ROUTE or len(route_from) > MAX_ROUTE + 1:
        raise _malformed(f"a route of more than {MAX_ROUTE} node ids")
    for node in (*route_to, *route_from):
        if node not in seen:
            if type(node) is not str or node_id_problem(node) is not None:
                raise _malformed(f"a route holds {show(node)}, not a node id")
            if len(seen) < ROUTED_IDS_KEPT:
                seen.add(node)
    if type(type_name) is not str or not type_name or type(subject) is not str:
        raise _malformed("the type name and subject must be str, the type name not empty")
    check_length(type_name, "type name", longest)
    check_length(subject, "subject", longest)
    if type(request_id) is not int or type(repliers) is not int or request_id < 0 or repliers < 0:
        raise _malformed(
            f"request id {show(request_id)} and repliers {show(repliers)}: expected ints >= 0"
        )
    if type(body) is not bytes and not (
        kind == KIND_NOTIFY
        and type(body) is tuple
        and 0 < len(body) <= RUN_MAX
        and all(type(b) is bytes for b in body)
    ):
        raise _malformed(
            f"body is {show(body)}, expected bin (or, a NOTIFY, an array of 1..{RUN_MAX} bins)"
        )
    return RoutedFrame(kind, route_to, route_from, type_name, subject, request_id, repliers, body)


def join_pending(
    item: tuple[object, ...], pending: Any, most: int
) -> tuple[tuple[object, ...], int]:
    """(the drain) The routed notification ``item`` (``(OP_ROUTED, frame)``) with
    the ones right behind it in ``pending`` that go along the same route on the
    same key, at most ``most`` of them and ``RUN_MAX`` bodies in all, taken off
    ``pending`` into one run: the item to encode, and how many were taken."""
    first = item[1]
    assert isinstance(first, RoutedFrame)
    if first.kind != KIND_NOTIFY:
        return item, 0
    bodies = list(bodies_of(first))
    taken = 0
    while taken < most and pending:
        following = pending[0]
        if following.__class__ is not tuple or following[0] != item[0]:
            break
        frame = following[1]
        if not joins(first, frame) or len(bodies) + len(bodies_of(frame)) > RUN_MAX:
            break
        pending.popleft()
        taken += 1
        bodies.extend(bodies_of(frame))
    if not taken:
        return item, 0
    return (item[0], with_bodies(first, tuple(bodies))), taken
