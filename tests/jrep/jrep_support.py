"""Helpers for the J.REP gateway tests: message types, a bus serving J.REP, and a
real WebSocket client (the ``websockets`` library's synchronous client) that
speaks J.REP.  Everything here closes what it opens; waits have timeouts."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from actorbus import Bus, Notification, Reply, Request
from actorbus.net.jrep import Gateway, GatewaySettings

WAIT = 5.0


class Price(Notification, type_name="jreptest.Price"):
    value: Decimal
    volume: int = 0


class Sum(Reply, type_name="jreptest.Sum"):
    total: int


class Add(Request, type_name="jreptest.Add", replies=(Sum,)):
    a: int
    b: int


def _sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            pass
    return count


@contextlib.contextmanager
def serving(
    settings: GatewaySettings | None = None, node_id: str = "gw", **kwargs: Any
) -> Iterator[tuple[Bus, Gateway]]:
    """A bus serving J.REP on a free loopback port; closed on exit."""
    bus = Bus(node_id=node_id)
    try:
        gateway = bus.serve_jrep(0, name="web", settings=settings, **kwargs)
        yield bus, gateway
    finally:
        bus.close()


class Client:
    """A J.REP client over a real WebSocket.  Received messages are kept in
    ``seen``; :meth:`expect` waits (with a timeout) for one matching a predicate."""

    def __init__(self, gateway: Gateway, query: str = "", **kwargs: Any) -> None:
        self._connect = connect(gateway.url + query, open_timeout=WAIT, close_timeout=2, **kwargs)
        self.ws: ClientConnection = self._connect.__enter__()
        self.seen: list[dict[str, Any]] = []
        self._taken = 0
        self.prefix = ""

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._connect.__exit__(None, None, None)

    def send(self, *messages: dict[str, Any]) -> None:
        self.ws.send(json.dumps(list(messages)))

    def raw(self, data: str | bytes) -> None:
        self.ws.send(data)

    def _read(self, timeout: float) -> None:
        frame = self.ws.recv(timeout=timeout)
        messages = json.loads(frame)
        assert isinstance(messages, list), frame
        self.seen.extend(messages)

    def expect(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = WAIT
    ) -> dict[str, Any]:
        """The first message not taken yet that matches (later ones stay for the
        next call); AssertionError with what was seen if none comes in time."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            for i in range(self._taken, len(self.seen)):
                if predicate(self.seen[i]):
                    return self.seen.pop(i)
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no matching message within {timeout}s; seen {self.seen}")
            try:
                self._read(left)
            except TimeoutError:
                continue

    def closed_code(self, timeout: float = WAIT) -> int | None:
        """Read until the gateway closes the connection; its close code."""
        while True:
            try:
                self._read(timeout)
            except ConnectionClosed as exc:
                return exc.rcvd.code if exc.rcvd is not None else None

    def command(self, verb: str, timeout: float = WAIT) -> dict[str, Any]:
        return self.expect(
            lambda m: m.get("ToSubject") == "ClientBus" and m.get("CommandType") == verb, timeout
        )

    def error(self, code: str | None = None, timeout: float = WAIT) -> dict[str, Any]:
        return self.expect(
            lambda m: (
                m.get("ToSubject") == "ClientBusErrors"
                and (code is None or m.get("ErrorCode") == code)
            ),
            timeout,
        )

    def on(self, subject: str, timeout: float = WAIT) -> dict[str, Any]:
        return self.expect(lambda m: m.get("ToSubject") == subject, timeout)

    def join(self, *subscribe: dict[str, Any]) -> dict[str, Any]:
        """ConnectToQueue, the server's state sync, ``subscribe`` (RemoteSubscribe
        parts), then FinishStateSync: the federation is active.  Returns the
        server's CapabilitiesNotice."""
        self.send({"ToSubject": "ServerBus", "CommandType": "ConnectToQueue"})
        notice = self.command("CapabilitiesNotice")
        self.command("FinishStateSync")
        self.prefix = notice["ReplyPrefix"]
        self.send(
            *(
                {"ToSubject": "ServerBus", "CommandType": "RemoteSubscribe", **parts}
                for parts in subscribe
            ),
            {"ToSubject": "ServerBus", "CommandType": "FinishStateSync"},
        )
        return notice

    def sync(self) -> None:
        """Round trip: everything sent before was handled (an unknown verb comes
        back as an error, after the errors of what came before)."""
        self.send({"ToSubject": "ServerBus", "CommandType": "Ping?"})
        self.error("UnknownCommand")
