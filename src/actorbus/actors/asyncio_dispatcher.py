"""The ``asyncio`` dispatcher kind: one event-loop thread running its actors' tasks
and awaiting what they return (theory: :mod:`actorbus.actors.dispatcher`)."""

from __future__ import annotations

import asyncio
import threading
import types
from collections.abc import Callable, Coroutine, Generator
from time import perf_counter_ns
from typing import Any

from actorbus._log import logger
from actorbus.actors._context import _tls
from actorbus.actors._dispatcher_base import _CHUNK, Dispatcher
from actorbus.actors.failure import callback_label
from actorbus.actors.mailbox import Mailbox
from actorbus.config.schema import DispatcherConfig, DispatcherKind

__all__ = ["AsyncioDispatcher"]


# ---------------------------------------------------------------------- asyncio


def _new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency where it installs
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


@types.coroutine
def _as_actor(actor: Any, coro: Coroutine[Any, Any, Any]) -> Generator[Any, Any, Any]:
    """Drive ``coro`` step by step, with ``current_actor()`` set during each step."""
    tls = _tls
    value: Any = None
    error: BaseException | None = None
    while True:
        tls.actor = actor
        try:
            signal = coro.send(value) if error is None else coro.throw(error)
        except StopIteration as stop:
            return stop.value
        finally:
            tls.actor = None
        error = None
        value = None
        try:
            value = yield signal
        except BaseException as exc:
            error = exc


class AsyncioDispatcher(Dispatcher):
    """One event-loop thread (uvloop when importable) running its actors' tasks.

    ``thread_count`` is ignored (always one loop thread).  ``async def``
    callbacks are awaited in order, one at a time per actor.
    """

    kind = DispatcherKind.ASYNCIO
    is_async = True

    def __init__(self, config: DispatcherConfig) -> None:
        if config.thread_count != 1:
            logger.warning(
                "dispatcher {!r}: an asyncio dispatcher runs one event-loop thread; "
                "threadCount={} is ignored",
                config.name,
                config.thread_count,
            )
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_ident = -1
        self._pending: list[Mailbox] = []
        self._pending_lock = threading.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False
        self._call_soon: Callable[..., object] = self._before_start
        self._call_soon_threadsafe: Callable[..., object] = self._before_start
        #: between defer_runs() and run_deferred(): mailboxes made runnable on the loop
        #: thread, in order (None: not deferring)
        self._deferred: list[Mailbox] | None = None
        #: awaited on the loop when the dispatcher stops, before the loop stops
        self._stop_hooks: list[Callable[[], Coroutine[Any, Any, object]]] = []

    @property
    def thread_count(self) -> int:
        """Always 1: one event-loop thread."""
        return 1

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop, once started (``None`` before :meth:`start`)."""
        return self._loop

    @property
    def loop_thread_ident(self) -> int:
        """``threading.get_ident()`` of the loop thread (-1 before :meth:`start`)."""
        return self._loop_ident

    def _before_start(self, _fn: object, mailbox: Mailbox) -> None:
        with self._pending_lock:
            if self._loop is None:
                self._pending.append(mailbox)
                return
        self._call_soon_threadsafe(self._run_mailbox, mailbox)

    def _start_threads(self) -> None:
        ready = threading.Event()
        failure: list[BaseException] = []
        t = threading.Thread(
            target=self._run_loop,
            args=(ready, failure),
            name=self.thread_names[0],
            daemon=True,
        )
        self._threads.append(t)
        t.start()
        ready.wait()
        if failure:
            t.join()
            raise failure[0]

    def _run_loop(self, ready: threading.Event, failure: list[BaseException]) -> None:
        try:
            loop = _new_event_loop()
            asyncio.set_event_loop(loop)
        except BaseException as exc:
            failure.append(exc)
            ready.set()
            return
        self._loop_ident = threading.get_ident()
        with self._pending_lock:
            self._loop = loop
            self._call_soon = loop.call_soon
            self._call_soon_threadsafe = loop.call_soon_threadsafe
            for mailbox in self._pending:
                loop.call_soon(self._run_mailbox, mailbox)
            self._pending.clear()
        ready.set()
        try:
            loop.run_forever()
        finally:
            try:
                tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
                for t in tasks:
                    t.cancel()
                if tasks:
                    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                asyncio.set_event_loop(None)
                loop.close()

    def add_stop_hook(self, hook: Callable[[], Coroutine[Any, Any, object]]) -> None:
        """(any thread, before :meth:`stop`) Await ``hook()`` on the loop when the
        dispatcher stops, before the loop stops: for whatever else runs on the loop
        (a network selector sharing it) to close its sockets while the loop still
        runs.  Hooks run in the order added; one that raises is logged and the
        others still run.  They should finish well within the ``stop()`` timeout."""
        self._stop_hooks.append(hook)

    def _signal_stop(self) -> None:
        self._stopping = True
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._stop_loop)
            except RuntimeError:  # already closed
                pass

    def _stop_loop(self) -> None:
        """(loop) Run the stop hooks, then stop the loop."""
        loop = self._loop
        assert loop is not None
        if not self._stop_hooks:
            loop.stop()
            return
        task = loop.create_task(self._run_stop_hooks(list(self._stop_hooks)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_stop_hooks(self, hooks: list[Callable[[], Coroutine[Any, Any, object]]]) -> None:
        try:
            for hook in hooks:
                try:
                    await hook()
                except Exception as exc:
                    logger.opt(exception=exc).error(
                        "dispatcher {!r}: stop hook {} failed: {}",
                        self.name,
                        callback_label(hook),
                        exc,
                    )
        finally:
            assert self._loop is not None
            self._loop.stop()

    def _schedule(self, mailbox: Mailbox) -> None:
        if threading.get_ident() == self._loop_ident:
            deferred = self._deferred
            if deferred is not None:
                deferred.append(mailbox)
            else:
                self._call_soon(self._run_mailbox, mailbox)
            return
        try:
            self._call_soon_threadsafe(self._run_mailbox, mailbox)
        except RuntimeError:
            # The loop is closed: the dispatcher was stopped.  Posts after stop
            # are accepted and dropped, like tasks left queued at stop.
            logger.debug(
                "dispatcher {!r} is stopped; task for actor {!r} dropped", self.name, mailbox.name
            )

    def defer_runs(self) -> bool:
        """(loop thread, outside actor code) Until :meth:`run_deferred`, keep the
        mailboxes made runnable on this thread instead of scheduling them.

        For a loop callback that delivers messages (a network read): the actors
        then run at its end, before the loop polls again.  Returns False, and
        changes nothing, when a deferral is already open (nested callers leave it
        to the outer one).
        """
        if self._deferred is not None:
            return False
        self._deferred = []
        return True

    def run_deferred(self) -> None:
        """(loop thread) Close the deferral :meth:`defer_runs` opened and run the
        mailboxes it kept, in order, as the loop would have (quantum included: a
        mailbox left with work is scheduled again with ``call_soon``)."""
        deferred, self._deferred = self._deferred, None
        if deferred:
            c = self._counters[0]
            c.after_read += len(deferred)
            c.scheduled += len(deferred)
            drain = self._drain  # _run_mailbox's work, without its call
            for i, mailbox in enumerate(deferred):
                try:
                    drain(mailbox)
                except BaseException:
                    for rest in deferred[i + 1 :]:  # not lost: the loop runs them
                        self._call_soon(self._run_mailbox, rest)
                    raise

    def _run_mailbox(self, mailbox: Mailbox) -> None:
        self._counters[0].scheduled += 1
        self._drain(mailbox)

    def _drain(self, mailbox: Mailbox) -> None:
        c = self._counters[0]
        queue = mailbox.tasks
        popleft = queue.popleft
        clock = perf_counter_ns
        tls = _tls
        tls.actor = mailbox.actor
        mailbox.running = True
        deadline = clock() + self._quantum_ns
        n = 0
        try:
            while True:
                depth = len(queue) >> 1  # two items per task
                if depth > mailbox.peak:  # noqa: PLR1730 (no builtin call per drain)
                    mailbox.peak = depth
                if not depth:
                    break
                if depth > _CHUNK:  # noqa: PLR1730
                    depth = _CHUNK
                for i in range(depth):
                    fn = popleft()
                    arg = popleft()
                    try:
                        r = fn(arg)
                    except Exception as exc:
                        self._task_failed(mailbox, fn, arg, exc, c)
                    except BaseException as exc:
                        self._task_fatal(mailbox, fn, arg, exc)
                    else:
                        if r is not None and (isinstance(r, Coroutine) or hasattr(r, "__await__")):
                            n += i + 1
                            self._await(mailbox, fn, arg, r)
                            return  # the token stays ours until the awaitable is done
                    if queue and clock() > deadline:
                        n += i + 1
                        c.overruns += 1
                        mailbox.quantum_overruns += 1
                        mailbox.running = False
                        self._call_soon(self._run_mailbox, mailbox)
                        return
                n += depth
        finally:
            c.tasks += n
            mailbox.tasks_run += n
            tls.actor = None
        mailbox.running = False
        if mailbox.idle_again():  # a task slipped in: go again
            self._call_soon(self._run_mailbox, mailbox)

    def _await(self, mailbox: Mailbox, fn: object, arg: Any, awaitable: Any) -> None:
        loop = self._loop
        assert loop is not None  # we are running on it
        coro = awaitable if isinstance(awaitable, Coroutine) else _awaiting(awaitable)
        t = loop.create_task(self._await_then_resume(mailbox, fn, arg, coro))
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _await_then_resume(
        self, mailbox: Mailbox, fn: object, arg: Any, coro: Coroutine[Any, Any, Any]
    ) -> None:
        try:
            await _as_actor(mailbox.actor, coro)
        except asyncio.CancelledError as exc:
            if self._stopping:
                raise
            # Cancelled from inside (the callback awaited something that was
            # cancelled): that callback failed; the actor goes on.
            self._task_failed(mailbox, fn, arg, exc, self._counters[0])
        except Exception as exc:
            self._task_failed(mailbox, fn, arg, exc, self._counters[0])
        except BaseException as exc:
            self._task_fatal(mailbox, fn, arg, exc)
        self._drain(mailbox)


async def _awaiting(awaitable: Any) -> Any:
    """A coroutine awaiting ``awaitable`` (a future or any object with ``__await__``)."""
    return await awaitable
