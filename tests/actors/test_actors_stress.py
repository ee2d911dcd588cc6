"""Stress: 8 actors on a 4-thread dispatcher, 100k tasks each from 4 outside posters.

Every actor must see each poster's tasks in posting order, and no two callbacks
of one actor may ever overlap (checked with an "inside a callback" flag).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from actorbus import Actor, ActorRuntime
from actorbus.config import DispatcherConfig, DispatcherKind

ACTORS = 8
POSTERS = 4
PER_POSTER = 25_000  # per actor: 4 x 25k = 100k tasks; 800k in all


class Checker(Actor):
    def __init__(self, name: str, done: Callable[[], None]) -> None:
        super().__init__(name)
        self.last = [-1] * POSTERS
        self.inside = False
        self.overlaps = 0
        self.order_errors = 0
        self.count = 0
        self._done = done

    def on_task(self, poster: int, seq: int) -> None:
        if self.inside:
            self.overlaps += 1
        self.inside = True
        if seq != self.last[poster] + 1:
            self.order_errors += 1
        self.last[poster] = seq
        self.count += 1
        if self.count == POSTERS * PER_POSTER:
            self._done()
        self.inside = False


def test_stress_order_and_no_overlap(make_runtime: Callable[..., ActorRuntime]) -> None:
    runtime = make_runtime(
        DispatcherConfig(name="stress", kind=DispatcherKind.BLOCKING, thread_count=4)
    )
    done = threading.Event()
    left = [ACTORS]
    lock = threading.Lock()

    def arrive() -> None:
        with lock:
            left[0] -= 1
            if not left[0]:
                done.set()

    actors = [Checker(f"stress-{i}", arrive) for i in range(ACTORS)]
    for a in actors:
        runtime.register(a)
    runtime.startup(actors).wait(10)
    go = threading.Event()

    def poster(p: int) -> None:
        targets = [(a._ab_mailbox.post, a.on_task) for a in actors]  # type: ignore[union-attr]
        go.wait(10)
        for seq in range(PER_POSTER):
            for post, fn in targets:
                post(fn, p, seq)

    threads = [
        threading.Thread(target=poster, args=(p,), name=f"poster-{p}") for p in range(POSTERS)
    ]
    for t in threads:
        t.start()
    start = time.perf_counter()
    go.set()
    for t in threads:
        t.join()
    posted = time.perf_counter() - start
    assert done.wait(60), f"not all tasks ran: {[a.count for a in actors]}"
    elapsed = time.perf_counter() - start
    total = ACTORS * POSTERS * PER_POSTER
    stats = runtime.dispatcher("stress").stats()
    print(
        f"\n{total:,} tasks: posted in {posted:.2f} s, all run after {elapsed:.2f} s "
        f"({total / elapsed:,.0f} tasks/s); batches={stats.actors_scheduled:,} "
        f"overruns={stats.quantum_overruns:,} "
        f"max depth={max(m.max_depth for m in stats.mailboxes):,}"
    )
    for a in actors:
        assert a.count == POSTERS * PER_POSTER
        assert a.order_errors == 0, a.name
        assert a.overlaps == 0, a.name
        assert a.last == [PER_POSTER - 1] * POSTERS
    assert stats.tasks_run == total + ACTORS  # + one startup task each
    assert stats.task_failures == 0
