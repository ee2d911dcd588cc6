"""PushStream: a lazy pipeline of operations over pushed events.

Building a stream (``of``, ``subscribe``, ``from_source``, then operations)
starts nothing: a terminal operation connects the chain, from its sink back
to the source, and the source starts pushing.  A stream is used once: each
operation or terminal operation takes it, and a second one on the same
stream is refused (``split`` or ``fork`` give several consumers).

Threads: every stage of one stream runs on its executor (``_exec``), one
event at a time: an actor's dispatcher for a stream made on an actor, else
the thread that waits for the result (a virtual clock: docs/streams.md).
"""

from __future__ import annotations

import asyncio
import datetime
from collections import deque
from collections.abc import AsyncIterator, Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..errors import UsageError
from . import _batch, _buffer, _fanout, _ops
from ._exec import ActorExecutor, Executor, InlineExecutor, executor_of
from ._future import StreamFuture
from ._publish import PublishSink
from ._sources import EventSource, IterSource
from ._stage import PushEvent, Sink
from ._terminal import NONE, make_terminal

if TYPE_CHECKING:
    from ..actors.actor import Actor
    from ..bus.feeds import PublishFeed

__all__ = ["PushStream"]

T = TypeVar("T")
R = TypeVar("R")

Connect = _fanout.Connect


class _Control:
    """What every stream of one pipeline shares: the executor and its stop."""

    __slots__ = ("executor", "stops")

    def __init__(self, executor: Executor | None) -> None:
        self.executor = executor
        self.stops: list[Callable[[], None]] = []


class PushStream(Generic[T]):
    """A stream of events pushed by a source through operations to one
    terminal operation (OSGi RFC 214 PushStream; docs/streams.md)."""

    __slots__ = ("_connect", "_control", "_items", "_taken")

    def __init__(self, connect: Connect, control: _Control, items: Iterable[Any] | None = None):
        self._connect = connect
        self._control = control
        self._taken = False
        self._items = items

    # ------------------------------------------------------------------ sources
    @classmethod
    def of(cls, items: Iterable[T], *, on: Actor | Executor | None = None) -> PushStream[T]:
        """A stream of ``items``, then its close.  ``on``: the actor (or
        executor) it runs on; by default the thread that waits for the result,
        on a virtual clock."""
        return cls(IterSource(items).open, _Control(executor_of(on)), items)

    @classmethod
    def from_source(
        cls, source: EventSource | Any, *, on: Actor | Executor | None = None
    ) -> PushStream[Any]:
        """A stream of any source with ``open(sink, executor) -> stop``, such
        as an :class:`EventSource` other code publishes into."""
        return cls(source.open, _Control(executor_of(on)))

    def items_of(self) -> Iterable[Any]:
        """(for ``flat_map``) The items of a stream made with :meth:`of`."""
        if self._items is None:
            raise UsageError(
                "flat_map(fn): fn returned a stream not made with PushStream.of(); "
                "return an iterable (or PushStream.of(items)) instead"
            )
        return self._items

    # ---------------------------------------------------------------- plumbing
    def _take(self, what: str) -> None:
        if self._taken:
            raise UsageError(
                f"{what} on a stream that already has its consumer: a stream is used "
                "once; use split() or fork() to give several consumers the same events"
            )
        self._taken = True

    def _then(self, what: str, make: Callable[[Sink, Executor], Sink]) -> PushStream[Any]:
        self._take(what)
        up = self._connect

        def connect(down: Sink, executor: Executor) -> Callable[[], None]:
            return up(make(down, executor), executor)

        return PushStream(connect, self._control)

    # ------------------------------------------------------------ intermediate
    def filter(self, pred: Callable[[T], bool]) -> PushStream[T]:
        """Only the events for which ``pred(event)`` is true."""
        return self._then("filter()", lambda d, _: _ops.FilterStage(d, pred))

    def map(self, fn: Callable[[T], R]) -> PushStream[R]:
        """``fn(event)`` for each event."""
        return self._then("map()", lambda d, _: _ops.MapStage(d, fn))

    def flat_map(self, fn: Callable[[T], Iterable[R]]) -> PushStream[R]:
        """The items of ``fn(event)`` (an iterable, or ``PushStream.of(...)``) for each event."""
        return self._then("flat_map()", lambda d, _: _ops.FlatMapStage(d, fn))

    def distinct(self, key: Callable[[T], Hashable] | None = None) -> PushStream[T]:
        """Each event (or each ``key(event)``) once: the first one seen."""
        return self._then("distinct()", lambda d, _: _ops.DistinctStage(d, key))

    def sorted(
        self, key: Callable[[T], Any] | None = None, *, reverse: bool = False
    ) -> PushStream[T]:
        """Every event, sorted, sent at the close (it holds them all until then)."""
        return self._then("sorted()", lambda d, _: _ops.SortedStage(d, key, reverse))

    def limit(self, n: int) -> PushStream[T]:
        """The first ``n`` events (n >= 1), then the close; the source is stopped."""
        count = _ops.positive_count("limit", n, 1)
        return self._then("limit()", lambda d, _: _ops.LimitStage(d, count))

    def skip(self, n: int) -> PushStream[T]:
        """All but the first ``n`` events."""
        count = _ops.positive_count("skip", n, 0)
        return self._then("skip()", lambda d, _: _ops.SkipStage(d, count))

    def coalesce(
        self,
        count_or_fn: int | Callable[[], int] | Callable[[T], R | None],
        fn: Callable[[list[T]], R] | None = None,
    ) -> PushStream[R]:
        """``coalesce(count, fn)``: ``fn(batch)`` for each ``count`` events (a
        callable count is read again for each batch); the partial batch is
        flushed at the close.  ``coalesce(fn)``: ``fn(event)`` returns the
        event to send, or None for none yet; nothing is flushed."""
        if fn is None:
            acc: Callable[[Any], Any] = count_or_fn  # type: ignore[assignment]
            if not callable(acc):
                raise UsageError(
                    f"coalesce({count_or_fn!r}): give a count and a function "
                    "(coalesce(3, sum)) or one accumulating function"
                )
            return self._then("coalesce()", lambda d, _: _batch.AccumulateStage(d, acc))
        count = count_or_fn
        if not callable(count):
            _ops.positive_count("coalesce", count, 1)
        batch_fn = fn
        return self._then(
            "coalesce()",
            lambda d, _: _batch.CountStage(d, count, batch_fn),  # type: ignore[arg-type]
        )

    def window(
        self,
        duration: float | datetime.timedelta | Callable[[], float | datetime.timedelta],
        fn: Callable[[list[T]], R],
        *,
        max_count: int | None = None,
    ) -> PushStream[R]:
        """``fn(events)`` for each window: a window opens at an event, closes
        ``duration`` (seconds or a timedelta; a callable is read for each
        window) later or at ``max_count`` events, whichever comes first; the
        open window is flushed at the close."""
        if not callable(duration):
            _batch.seconds(duration)
        if max_count is not None:
            _ops.positive_count("window max_count", max_count, 1)
        return self._then(
            "window()", lambda d, ex: _batch.WindowStage(d, ex, duration, fn, max_count)
        )

    def buffer(
        self,
        capacity: int = 32,
        *,
        queue_policy: _buffer.QueuePolicy = _buffer.QueuePolicy.BLOCK,
        pushback_policy: _buffer.PushbackPolicy = _buffer.PushbackPolicy.LINEAR,
        base_ms: int = 10,
        stats: _buffer.BufferStats | None = None,
    ) -> PushStream[T]:
        """A queue of ``capacity`` events between the pusher and the rest of
        the stream, which takes them one task at a time.  ``queue_policy``:
        what a full queue does; ``pushback_policy`` and ``base_ms``: the
        back-pressure answered to the pusher; ``stats``: counters to read."""
        _buffer.check_buffer(capacity, base_ms, queue_policy, pushback_policy)
        return self._then(
            "buffer()",
            lambda d, ex: _buffer.BufferStage(
                d,
                ex,
                capacity=capacity,
                policy=queue_policy,
                pushback_policy=pushback_policy,
                base_ms=base_ms,
                stats=stats,
            ),
        )

    def fork(self, n: int, delay_ms: int = 0) -> PushStream[T]:
        """Hand each event downstream in its own task of the stream's executor,
        at most ``n`` waiting; while ``n`` wait the pusher is answered
        ``delay_ms``.  The pusher is never held by downstream work."""
        count = _ops.positive_count("fork", n, 1)
        delay = _ops.positive_count("fork delay_ms", delay_ms, 0)
        return self._then("fork()", lambda d, ex: _fanout.ForkStage(d, ex, count, delay))

    def split(self, *predicates: Callable[[T], bool]) -> tuple[PushStream[T], ...]:
        """One stream per predicate: an event goes to every branch whose
        predicate matches.  The source starts when any branch starts and stops
        when every started branch has closed."""
        if not predicates:
            raise UsageError("split() needs at least one predicate")
        self._take("split()")
        hub = _fanout.SplitHub(self._connect, predicates)

        def branch(index: int) -> PushStream[T]:
            def connect(down: Sink, executor: Executor) -> Callable[[], None]:
                return hub.connect(index, down, executor)

            return PushStream(connect, self._control)

        return tuple(branch(i) for i in range(len(predicates)))

    def merge(self, *others: PushStream[T]) -> PushStream[T]:
        """The events of this stream and of ``others`` as they come; closes
        when all closed, ends with the first error.  All run on this stream's
        executor (give them the same actor)."""
        streams = (self, *others)
        for s in streams:
            s._take("merge()")
        ups = [s._connect for s in streams]

        def connect(down: Sink, executor: Executor) -> Callable[[], None]:
            return _fanout.MergeHub(ups, down, executor).stop

        return PushStream(connect, self._control)

    def adjust_back_pressure(self, fn: Callable[..., int]) -> PushStream[T]:
        """Rewrite the back-pressure downstream answers: ``fn(bp)`` or
        ``fn(event, bp)`` returns the milliseconds to answer upstream."""
        return self._then("adjust_back_pressure()", lambda d, _: _ops.AdjustStage(d, fn))

    def on_close(self, fn: Callable[[], object]) -> PushStream[T]:
        """Run ``fn()`` once when the stream ends (closed, failed, or stopped by
        a consumer or ``limit``)."""
        return self._then("on_close()", lambda d, _: _ops.OnCloseStage(d, fn))

    def on_error(self, fn: Callable[[BaseException], object]) -> PushStream[T]:
        """Run ``fn(exc)`` when the error event passes (it still goes on)."""
        return self._then("on_error()", lambda d, _: _ops.OnErrorStage(d, fn))

    # --------------------------------------------------------------- terminal
    def _run(self, what: str, sink_of: Callable[[StreamFuture[Any]], Sink]) -> StreamFuture[Any]:
        self._take(what)
        control = self._control
        if control.executor is None:
            control.executor = InlineExecutor()
        executor = control.executor
        future: StreamFuture[Any] = StreamFuture(executor)
        sink = sink_of(future)
        up = self._connect

        def start() -> None:
            try:
                control.stops.append(up(sink, executor))
            except Exception as exc:
                sink.error(exc)

        executor.post(start)
        return future

    def _terminal(self, kind: str, *args: Any) -> StreamFuture[Any]:
        return self._run(f"{kind}()", lambda f: make_terminal(kind, f, *args))

    def for_each(self, fn: Callable[[T], int | None]) -> StreamFuture[None]:
        """Call ``fn(event)`` for each event; its answer is the back-pressure
        (None or 0: go on; n > 0: wait n ms; negative: close).  Resolves with
        None at the close."""
        return self._terminal("for_each", fn)

    def for_each_event(self, fn: Callable[[PushEvent[T]], int | None]) -> StreamFuture[int]:
        """Call ``fn(PushEvent)`` for every event, the close or error too;
        resolves with the number of data events."""
        return self._terminal("for_each_event", fn)

    def collect(self) -> StreamFuture[list[T]]:
        """Every event, in a list, at the close."""
        return self._terminal("collect")

    to_list = collect

    def reduce(self, *args: Any, default: Any = None) -> StreamFuture[Any]:
        """``reduce(fn)``: ``fn(acc, event)`` from the first event; an empty
        stream gives ``default``.  ``reduce(identity, fn)``: from ``identity``."""
        if len(args) == 1:
            return self._terminal("reduce", NONE, args[0], default)
        if len(args) == 2:
            return self._terminal("reduce", args[0], args[1], default)
        raise UsageError(f"reduce() takes (fn) or (identity, fn), found {len(args)} arguments")

    def count(self) -> StreamFuture[int]:
        """How many events there were."""
        return self._terminal("count")

    def min(
        self, key: Callable[[T], Any] | None = None, *, default: Any = None
    ) -> StreamFuture[Any]:
        """The smallest event (by ``key``); ``default`` when there was none."""
        return self._terminal("min", key, default)

    def max(
        self, key: Callable[[T], Any] | None = None, *, default: Any = None
    ) -> StreamFuture[Any]:
        """The largest event (by ``key``); ``default`` when there was none."""
        return self._terminal("max", key, default)

    def any_match(self, pred: Callable[[T], bool]) -> StreamFuture[bool]:
        """True at the first event that matches (the source stops); else False."""
        return self._terminal("any_match", pred)

    def all_match(self, pred: Callable[[T], bool]) -> StreamFuture[bool]:
        """False at the first event that does not match; else True."""
        return self._terminal("all_match", pred)

    def none_match(self, pred: Callable[[T], bool]) -> StreamFuture[bool]:
        """False at the first event that matches; else True."""
        return self._terminal("none_match", pred)

    def find_first(self, *, default: Any = None) -> StreamFuture[Any]:
        """The first event (the source stops); ``default`` (None) for an empty
        stream: pass ``default=EMPTY`` when None may be an event."""
        return self._terminal("find_first", default)

    def to_publisher(
        self,
        feed: PublishFeed[Any],
        *,
        make: Callable[[T], Any] | None = None,
        owner: Actor | None = None,
    ) -> StreamFuture[int]:
        """Publish each event (or ``make(event)``) on ``feed``, an advertised
        publish feed declared UP; at the end the feed is declared DOWN.  The
        wait its subscribers' streams ask for (``Pressure``, docs/streams.md)
        and its links' congestion are answered upstream as back-pressure
        (``owner``: the actor that watches them, by default the stream's).
        Resolves with the number of events published."""
        executor = self._control.executor
        if owner is None and isinstance(executor, ActorExecutor):
            owner = executor.actor
        return self._run("to_publisher()", lambda f: PublishSink(f, feed, owner, make))

    def __aiter__(self) -> AsyncIterator[T]:
        """``async for event in stream`` in an asyncio actor: events wait in a
        queue of 64 at most, the pusher answered 1 ms per waiting event past it."""
        return _aiter(self)

    # ----------------------------------------------------------------- control
    def close(self) -> None:
        """Close the running stream: its source stops and the close event goes
        through every stage (each flushes what it holds)."""
        for stop in tuple(self._control.stops):
            stop()

    def __repr__(self) -> str:
        state = "used" if self._taken else "open"
        return f"<PushStream {state} on {self._control.executor!r}>"


async def _aiter(stream: PushStream[Any]) -> AsyncIterator[Any]:
    loop = asyncio.get_running_loop()
    queue: deque[tuple[int, Any]] = deque()
    wake: list[asyncio.Future[None] | None] = [None]

    def put(kind: int, value: Any) -> None:
        queue.append((kind, value))
        waiter = wake[0]
        if waiter is not None:
            wake[0] = None
            loop.call_soon_threadsafe(_set, waiter)

    def on_event(event: PushEvent[Any]) -> int:
        kind = {"data": 0, "close": 1, "error": 2}[event.kind.value]
        put(kind, event.error if kind == 2 else event.data)
        return max(0, len(queue) - 64)

    executor = stream._control.executor
    if executor is not None and executor.in_own_task():
        raise UsageError(
            f"'async for' over a stream that runs on the iterating actor itself ({executor!r}): "
            "its events are tasks of the mailbox that waits for this coroutine; make the "
            "stream on another actor (one on the same asyncio dispatcher shares its thread)"
        )
    future = stream.for_each_event(on_event)
    try:
        while True:
            while not queue:
                waiter: asyncio.Future[None] = loop.create_future()
                wake[0] = waiter
                if queue:
                    wake[0] = None
                    break
                await waiter
            kind, value = queue.popleft()
            if kind == 0:
                yield value
            elif kind == 2:
                raise value
            else:
                return
    finally:
        if not future.done():
            stream.close()


def _set(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
