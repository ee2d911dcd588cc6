"""Synchronous receive for code that is not an actor (scripts, tests, a REPL).

An :class:`Inbox` is a subscription whose deliveries go into a thread-safe
queue instead of an actor's mailbox; :meth:`Inbox.receive` blocks up to a
timeout.  The subscription's condition, if any, runs on the publisher's thread.
A link delivering a remote publisher's notifications into an inbox stops
reading while the inbox holds more than its ``input_backlog``, as it does for a
mailbox, so a slow reader pushes back on the publisher instead of growing the
queue without bound.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Generic, TypeVar

from .feeds import SubscribeFeed
from .message import MessageKey, Notification
from .scope import FeedState

__all__ = ["Inbox"]

N = TypeVar("N", bound=Notification)


class Inbox(Generic[N]):
    """Receive notifications of one key synchronously.

    ``receive(timeout)`` returns the next message, or None when ``timeout``
    seconds pass first.  ``wait_up(timeout)`` waits for the feed to come UP."""

    def __init__(self, feed: SubscribeFeed[N]) -> None:
        self._queue: queue.SimpleQueue[N] = queue.SimpleQueue()
        self._up = threading.Event()
        self._feed = feed
        feed._backlog = self  # a link feeding this inbox watches its depth
        feed.message_callback(self._put)
        feed.status_callback(self._status)
        feed.subscribe()

    def _put(self, message: N, feed: Any) -> None:
        self._queue.put(message)

    def _status(self, state: FeedState, feed: Any) -> None:
        if state is FeedState.UP:
            self._up.set()
        else:
            self._up.clear()

    @property
    def key(self) -> MessageKey:
        return self._feed.key

    @property
    def feed(self) -> SubscribeFeed[N]:
        return self._feed

    @property
    def is_up(self) -> bool:
        """True while at least one in-scope publisher has declared UP."""
        return self._up.is_set()

    def wait_up(self, timeout: float | None = None) -> bool:
        """Wait until the feed is UP; False if ``timeout`` passed first."""
        return self._up.wait(timeout)

    def receive(self, timeout: float | None = None) -> N | None:
        """The next notification, or None after ``timeout`` seconds (None: wait forever)."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def receive_nowait(self) -> N | None:
        """The next notification if one is queued, else None."""
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return None

    def drain(self) -> list[N]:
        """Every notification queued now."""
        out: list[N] = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out

    def __len__(self) -> int:
        return self._queue.qsize()

    @property
    def depth(self) -> int:
        """Notifications queued now (what a link's input back-pressure watches,
        as it watches an actor's mailbox: ``LinkSettings.input_backlog``)."""
        return self._queue.qsize()

    def close(self) -> None:
        """Unsubscribe and close the feed."""
        self._feed.close()

    def __enter__(self) -> Inbox[N]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
