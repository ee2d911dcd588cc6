"""A simulated multicast segment for the sans-IO channel protocol: every
datagram a node sends reaches every other node after that path's latency
(drawn once per pair of nodes from ``latency``, as receivers sit nearer or
farther; datagrams on one path keep their order, as on a LAN), unless the
test's ``drop`` rule says it is lost on the way to that node.  Time is the
simulation's own (no clock, no sleep)."""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from actorbus.config.settings import MulticastSettings
from actorbus.net.multicast.channel import ChannelProtocol
from actorbus.net.multicast.datagram import Decoded, decode
from actorbus.net.multicast.receiver import ReceiverEvent

#: (sender index, receiver index, decoded datagram) -> lost on that path
DropRule = Callable[[int, int, Decoded], bool]


@dataclass
class SimNet:
    settings: MulticastSettings
    seed: int = 1
    latency: tuple[float, float] = (0.0002, 0.001)
    drop: DropRule = lambda src, dst, d: False
    now: float = 0.0
    nodes: list[ChannelProtocol] = field(default_factory=list)
    events: list[list[ReceiverEvent]] = field(default_factory=list)
    key: bytes | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._queue: list[tuple[float, int, int, bytes]] = []
        self._order = itertools.count()
        self._paths: dict[tuple[int, int], float] = {}

    def add(self, name: str, *, publish: bool = True) -> int:
        node = ChannelProtocol(
            self.settings,
            name=name,
            stream=len(self.nodes) + 1,
            key=self.key,
            now=self.now,
            rng=random.Random(self.rng.random()),
            publish=publish,
        )
        self.nodes.append(node)
        self.events.append([])
        return len(self.nodes) - 1

    def send(self, index: int, payload: bytes) -> None:
        self.nodes[index].send(payload, self.now)
        self._flush()

    def _flush(self) -> None:
        low, high = self.latency
        for src, node in enumerate(self.nodes):
            for datagram in node.datagrams_to_send():
                decoded = decode(datagram, self.key)
                for dst in range(len(self.nodes)):
                    if dst == src or self.drop(src, dst, decoded):
                        continue
                    path = self._paths.get((src, dst))
                    if path is None:
                        path = self._paths[src, dst] = self.rng.uniform(low, high)
                    at = self.now + path
                    heapq.heappush(self._queue, (at, next(self._order), dst, datagram))

    def _collect(self) -> None:
        for index, node in enumerate(self.nodes):
            while (event := node.next_event()) is not None:
                self.events[index].append(event)

    def run(self, seconds: float) -> None:
        """Deliver datagrams and run timers for ``seconds`` of simulated time."""
        end = self.now + seconds
        self._tick_all()
        while True:
            due = min((n.next_deadline() for n in self.nodes), default=end)
            if self._queue:
                due = min(due, self._queue[0][0])
            if due > end:
                self.now = end
                break
            self.now = max(self.now, due)
            while self._queue and self._queue[0][0] <= self.now:
                _, _, dst, datagram = heapq.heappop(self._queue)
                self.nodes[dst].receive(datagram, self.now)
            self._tick_all()
        self._collect()

    def _tick_all(self) -> None:
        for node in self.nodes:
            if node.next_deadline() <= self.now:
                node.tick(self.now)
        self._flush()
        self._collect()
