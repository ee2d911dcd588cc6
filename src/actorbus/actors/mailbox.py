"""Mailbox: an actor's FIFO of tasks and its idle/runnable/running state.

Theory of operation
-------------------
Every call into an actor is a *task*: ``fn(*args)``, queued in the actor's
mailbox by :meth:`Mailbox.post` and run later by a thread of the actor's
dispatcher.  ``post`` is the hot path of the whole system (every notification
delivery is one post), so it takes no lock and leaves nothing behind for the
garbage collector:

* the tasks live in a :class:`collections.deque`, **two items per task**: a
  one-argument task (the common case: a callback and a message) is stored flat
  as ``fn, arg``; any other task as ``_apply, (fn, *args)``.  Both go in with
  one ``deque.extend`` of a 2-tuple, a single C call that runs no Python code,
  hence atomic under the GIL (a task's two items are never split by another
  poster's).  Storing ``fn, arg`` flat means a queued task is not a tuple the
  cyclic GC must traverse at every collection while it waits; in a busy
  mailbox that saves a large share of the cost per task (docs/performance.md).
* the "scheduled" flag is a one-slot dict holding a token.  ``dict.pop(0,
  False)`` is a single atomic test-and-clear: it returns ``True`` to exactly one
  caller while the token is present, and ``False`` to everyone else until the
  token is put back with ``token[0] = True``.  (Both are single C calls on an
  int key that run no Python code, so they are atomic under the GIL.)  This is
  the protocol of a non-blocking ``Lock.acquire(False)``, at a fraction of the
  cost.

``post_each(fn, args)`` queues ``fn(arg)`` for every ``arg`` the same way,
with one ``extend`` of the flat list ``fn, arg1, fn, arg2, ...`` (one C call,
atomic as above), then tries for the token once.

``post``, ``post_one`` and ``post_each`` queue tasks; :meth:`Mailbox.post_parts`
hands out the three steps of a post, ``(put, claim, schedule)``, for the one
loop outside this module that queues tasks: the bus core's publish
(:meth:`actorbus.bus.feeds.PublishFeed.publish`), which runs them inline for
each subscriber rather than pay a Python call per publish (a noticeable share
of a local delivery: docs/performance.md, "Figures measured once").  A change to
the protocol below is a change to these methods and to ``post_parts``'s
contract, here.

``post`` appends the task, then tries to take the token.  The one poster that
takes it puts the mailbox on its dispatcher's run queue; every other poster
returns at once.  A dispatcher worker that takes the mailbox off the run queue
drains tasks in a batch; when the deque is empty it *puts the token back and
then looks at the deque again*, and if a task arrived meanwhile and it wins the
token again, it schedules the mailbox again.

States: **idle** (token present, nothing to do), **runnable** (token taken, on
the run queue), **running** (token taken, a worker is draining it).

Why no task is ever stranded.  Take a task appended by poster P.  Either P
takes the token (then P schedules the mailbox, and the worker that drains it
runs until the deque is empty, which is after P's task since the deque is
FIFO), or P's attempt failed because someone X held the token at that moment.
If X is another poster, X schedules the mailbox after P's append: the same
argument applies.  If X is a worker, X has not put the token back yet; it puts
it back *after* P's failed attempt, hence after P's append, and then re-reads
the deque, so it sees P's task and either takes the token again (and schedules)
or loses it to a newer poster, who schedules.  In every case somebody who will
drain the mailbox holds the token after P's append.

Why callbacks never overlap.  Only the token holder drains, there is one
token, and the holder keeps it from the moment it schedules the mailbox until
the worker has finished its batch.  So a mailbox is on the run queue at most
once and run by at most one thread at a time.

Worker side: a dispatcher's worker that took a mailbox off its run queue
holds the token; it pops the tasks from :attr:`Mailbox.tasks` (nobody else
pops), marks :attr:`Mailbox.running` while it drains, records the depth it
samples in :attr:`Mailbox.peak`, and ends with :meth:`Mailbox.idle_again`.
These are the dispatcher's, not an application's.

Watching (recording an actor): :meth:`Mailbox.watch` swaps the task deque for
a :class:`_WatchedTasks`, whose ``popleft`` hands each task's function to the
watcher wrapped, so the worker runs ``watcher.run(fn, arg)`` instead of
``fn(arg)``: on the actor's thread, in mailbox order, when the task is
delivered.  Only that mailbox pays for it; every other mailbox keeps the plain
deque, and posting (``extend``, a C call) is the same for both.

Counters: :attr:`depth` (tasks waiting now) and :attr:`max_depth` (the
high-water mark).  ``post`` does not maintain the high-water mark (that would
add a noticeable share to every post); the worker samples the depth when it picks the
mailbox up and again at least every 1024 tasks while draining.  Under the GIL
the deque only grows while the worker is not running, so the peak is seen
when the worker resumes: at a batch start exactly, and within 1024 tasks when
it resumes in the middle of a batch.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVarTuple

from actorbus.errors import UsageError

if TYPE_CHECKING:
    from actorbus.actors.actor import Actor
    from actorbus.actors.dispatcher import Dispatcher

__all__ = ["Mailbox", "MailboxState", "TaskWatcher", "WatchedTask", "unpack_task"]


class TaskWatcher(Protocol):
    """What :meth:`Mailbox.watch` is given (the recorder of an actor)."""

    #: the wall time (ns) stamped on the task being run, None between tasks
    wall_ns: int | None

    def run(self, fn: Callable[[Any], object], arg: Any) -> object:
        """Run the task ``fn(arg)`` (and look at it); return what it returned."""

    def published(self, feed: Any, message: Any) -> None:
        """The actor published ``message`` on ``feed`` (an output)."""

    def requested(self, feed: Any, handle: Any) -> None:
        """The actor's request feed sent the request of ``handle`` (an output)."""

    def replied(self, incoming: Any, reply: Any) -> None:
        """The actor's replier answered ``incoming`` with ``reply`` (an output)."""


class WatchedTask:
    """A task's function as a watched mailbox hands it to its worker: called
    with the task's argument, it runs ``watcher.run(fn, arg)``.  ``fn`` is the
    task's own function (failure reports name its callback)."""

    __slots__ = ("fn", "watcher")

    def __init__(self, watcher: TaskWatcher, fn: Callable[[Any], object]) -> None:
        self.watcher = watcher
        self.fn = fn

    def __call__(self, arg: Any) -> object:
        return self.watcher.run(self.fn, arg)


class _WatchedTasks(deque[Any]):
    """A task deque whose every task's function comes out as a :class:`WatchedTask`.

    Tasks are stored ``fn, arg``: the worker pops the function, then the
    argument; every other pop (the function's) returns it wrapped, and the
    worker then calls that with the argument."""

    def __init__(self, watcher: TaskWatcher) -> None:
        super().__init__()
        self.watcher = watcher
        self.fn_next = True

    def popleft(self) -> Any:
        item = super().popleft()
        if self.fn_next:
            self.fn_next = False
            return WatchedTask(self.watcher, item)
        self.fn_next = True
        return item


def _apply(task: tuple[Any, ...]) -> object:
    """Run a task that does not have exactly one argument (stored packed)."""
    return task[0](*task[1:])


def unpack_task(
    fn: Callable[[Any], object], arg: Any
) -> tuple[Callable[..., object], tuple[Any, ...]]:
    """The function and the arguments of a task as the deque holds it
    (``fn, arg`` flat, or ``_apply, (fn, *args)``)."""
    if fn is _apply:
        return arg[0], tuple(arg[1:])
    return fn, (arg,)


Ts = TypeVarTuple("Ts")

_Parts = tuple[
    Callable[[tuple[Callable[[Any], object], Any]], object],
    Callable[[int, bool], bool],
    Callable[["Mailbox"], object],
]

#: ``"idle"``, ``"runnable"`` (on the run queue) or ``"running"`` (being drained).
MailboxState = Literal["idle", "runnable", "running"]


class Mailbox:
    """The task queue of one actor, bound to one dispatcher for its whole life.

    Made by the runtime at registration (``Mailbox(dispatcher, actor=actor)``);
    it attaches itself to ``dispatcher`` so it shows in
    :meth:`Dispatcher.stats`.  Call :meth:`detach` when it is no longer used.
    Tasks still queued when it is detached still run.
    """

    __slots__ = (
        "__weakref__",
        "_append",
        "_claim",
        "_dispatcher",
        "_parts",
        "_queue",
        "_schedule",
        "_token",
        "actor",
        "name",
        "peak",
        "quantum_overruns",
        "running",
        "task_failures",
        "tasks",
        "tasks_run",
        "watcher",
    )

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        actor: Actor | None = None,
        name: str | None = None,
    ) -> None:
        queue: deque[Any] = deque()  # fn, arg, fn, arg, ...  (two items per task)
        token = {0: True}
        self._queue = queue
        #: (the draining worker only) the task deque, ``fn, arg`` per task;
        #: only the worker holding the token pops it (see "Worker side" above)
        self.tasks = queue
        self._append = queue.append
        self._token = token
        self._claim = token.pop
        #: (the draining worker only) True while it drains
        self.running = False
        #: (the draining worker only) the highest depth it sampled
        self.peak = 0
        #: (the draining worker only) tasks run, counted per batch as the
        #: dispatcher's own total is
        self.tasks_run = 0
        #: (the draining worker only) tasks that raised
        self.task_failures = 0
        #: (the draining worker only) batches cut short by the quantum
        self.quantum_overruns = 0
        self._dispatcher = dispatcher
        self._schedule = dispatcher._schedule
        self._parts: _Parts | None = None  # post_parts(), made on first use
        #: the actor whose tasks these are (``None`` for a bare mailbox).
        self.actor = actor
        #: used in stats and log records.
        self.name = name if name is not None else (actor.name if actor is not None else "?")
        #: the :class:`TaskWatcher` every task runs through, or None (see :meth:`watch`)
        self.watcher: TaskWatcher | None = None
        dispatcher._attach(self)

    if TYPE_CHECKING:

        def post(self, fn: Callable[[*Ts], object], /, *args: *Ts) -> None:
            """Queue ``fn(*args)`` to run later on this mailbox's dispatcher."""

    else:

        def post(self, *task):
            """Queue ``fn(*args)`` (called as ``post(fn, *args)``) to run later.

            Thread-safe, never blocks, never runs ``fn`` inline; tasks of one
            mailbox run in the order they were posted, one at a time.
            """
            if len(task) == 2:
                self._queue.extend(task)  # fn, arg: flat
            else:
                self._queue.extend((_apply, task))
            if self._claim(0, False):
                self._schedule(self)

    def post_one(self, fn: Callable[[Any], object], arg: object) -> None:
        """``post(fn, arg)``: the one-argument task every feed posts, without an
        argument tuple to look into."""
        self._queue.extend((fn, arg))
        if self._claim(0, False):
            self._schedule(self)

    def post_each(self, fn: Callable[[Any], object], args: list[Any]) -> None:
        """``post(fn, arg)`` for each of ``args`` in order, in one go: the tasks
        go into the deque with one ``extend`` (atomic, as a single task's is, so
        no other poster's task lands between them) and the mailbox is
        scheduled at most once."""
        n = len(args)
        if n:
            tasks = [fn, fn] * n  # fn, arg, fn, arg, ...: the flat storage
            tasks[1::2] = args
            self._queue.extend(tasks)
            if self._claim(0, False):
                self._schedule(self)

    def post_parts(self) -> _Parts:
        """``(put, claim, schedule)``: ``post_one(fn, arg)`` is exactly ::

            put((fn, arg))
            if claim(0, False):
                schedule(mailbox)

        ``put`` takes a one-argument task as an ``(fn, arg)`` pair, whatever the
        storage is.  For the bus core's publish loop only (see the module
        notes)."""
        parts = self._parts
        if parts is None:
            parts = self._parts = (self._queue.extend, self._claim, self._schedule)
        return parts

    def watch(self, watcher: TaskWatcher) -> None:
        """Run every task of this mailbox from now on through ``watcher.run(fn, arg)``.

        Only before anything was queued or a publisher was given the post's
        parts (before the actor's startup): the deque is swapped, and a poster
        holding the old one would bypass the watcher.  Raises UsageError
        otherwise, or when the mailbox is watched already."""
        if self.watcher is not None or self._queue or self._parts is not None:
            state = (
                "watched already"
                if self.watcher is not None
                else "in use (tasks queued or feeds placed)"
            )
            raise UsageError(
                f"cannot watch the mailbox of {self.name!r}: it is {state}; start watching "
                f"(recording) an actor once, after registering it and before its startup"
            )
        queue = _WatchedTasks(watcher)
        self.watcher = watcher
        self._queue = queue
        self.tasks = queue
        self._append = queue.append

    @property
    def dispatcher(self) -> Dispatcher:
        """The dispatcher whose threads run this mailbox's tasks."""
        return self._dispatcher

    @property
    def depth(self) -> int:
        """Tasks queued and not yet started."""
        return len(self._queue) >> 1

    @property
    def max_depth(self) -> int:
        """The highest :attr:`depth` seen so far (sampled by the worker, see the module docs)."""
        return max(self.peak, len(self._queue) >> 1)

    @property
    def state(self) -> MailboxState:
        """``"idle"``, ``"runnable"`` or ``"running"`` (a snapshot; it may change at once)."""
        if self.running:
            return "running"
        if 0 in self._token:
            return "idle"
        return "runnable"

    def idle_again(self) -> bool:
        """(the draining worker, its batch done) Put the token back; True when a
        task slipped in meanwhile and the caller won the token again: it must
        put the mailbox back on its run queue."""
        self._token[0] = True
        if self._queue:
            return self._claim(0, False)
        return False

    def detach(self) -> None:
        """Stop reporting this mailbox in its dispatcher's stats."""
        self._dispatcher._detach(self)

    def __repr__(self) -> str:
        return (
            f"<Mailbox {self.name!r} on {self._dispatcher.name!r} {self.state} depth={self.depth}>"
        )
