"""Per-run accounts that turn RECEIPT frames into the sender's ``lost`` counter.

A node keeps one account per peer node id and *run* (the run id of its LOGON
/ LOGON_ACCEPT).  When a connection with the peer ends, its data frames
written and read are added to the account of that connection's run.  At each
logon the node sends the peer, in RECEIPT, the frames it has read from that
run so far; the peer's RECEIPT says how many of ours it has read, so
``written - received`` is what the earlier connections lost in flight.

* ``lost`` is counted once per frame: each receipt adds only
  ``written - received - lost_so_far`` (never negative).
* A logon with another run id than the peer's last one says the peer
  restarted: its count of what it read from us started again at 0.  What was
  written to the last run and not covered by its last receipt can no longer
  be confirmed, so it is counted lost (once: the account remembers it), and
  the new run's account starts at 0 both ways.
* The last run's account is **kept**, not replaced: a logon with a new run id
  is not always a restart.  A process holding the nodes' secret may log on as
  an existing node (a stranger taking over its id, a copy of a node started
  twice); the real node then dials again with its own run id and takes the id
  back.  Its account is still here, so the RECEIPT it gets says everything
  this node read from it on every connection of that run, and it counts lost
  only what really was.  (What this node wrote to it before the takeover and
  was presumed lost at the takeover is not counted twice, but stays counted:
  a logon of another run cannot be told from a restart when it happens.)
* A receipt above what we wrote cannot be explained by a correct peer (or a
  connection of ours not ended yet, which only a crossed dial can cause); it
  adds nothing, and the next receipt settles the account.

Accounts are bounded: at most :data:`MAX_ACCOUNTS` (peer, run) accounts are
kept; past it the one away longest (no open connection, least recently
logged on or ended) is forgotten.  A forgotten run that comes back is a
stranger to the accounts: nothing is counted lost here for its earlier
connections, and since this node's RECEIPT then says it read nothing of it,
the peer counts everything it ever wrote to this node and its own receipts
did not cover as lost (it over-counts; it never under-counts).
Thread-safe: links of one node run on different I/O threads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["MAX_ACCOUNTS", "Receipts"]

#: Most peer accounts kept (one small record per peer node id); the one away
#: longest is forgotten past it.
MAX_ACCOUNTS = 4_096


@dataclass(slots=True)
class _Account:
    run_id: str
    #: data frames handed to the sockets of ended connections with this run
    written: int = 0
    #: data frames read from this run on ended connections
    received: int = 0
    #: the count of the peer's last receipt
    acknowledged: int = 0
    #: written frames already counted lost
    lost: int = 0
    #: connections with this run logged on and not ended (never forgotten while > 0)
    open: int = 0


class Receipts:
    """The receipt accounts of one node, by peer node id and run id."""

    def __init__(self, most: int = MAX_ACCOUNTS) -> None:
        self._lock = threading.Lock()
        #: by (peer node id, run id), least recently used first
        self._accounts: dict[tuple[str, str], _Account] = {}
        #: peer node id -> the run id of its last logon (while its account is kept)
        self._last_run: dict[str, str] = {}
        self._most = most

    def __len__(self) -> int:
        with self._lock:
            return len(self._accounts)

    def logon(self, peer: str, run_id: str) -> tuple[int, int]:
        """A connection with ``peer`` (run ``run_id``) was accepted.

        Returns the count to send in our RECEIPT, and how many frames written to
        the peer's last run (it restarted) are now known lost."""
        with self._lock:
            accounts = self._accounts
            lost = 0
            last = self._last_run.get(peer)
            if last is not None and last != run_id:
                previous = accounts.get((peer, last))
                if previous is not None:
                    lost = max(0, previous.written - previous.acknowledged - previous.lost)
                    previous.lost += lost
            account = accounts.pop((peer, run_id), None)
            if account is None:
                account = _Account(run_id)
            account.open += 1
            accounts[(peer, run_id)] = account  # the most recently used now
            self._last_run[peer] = run_id
            if len(accounts) > self._most:
                self._forget_one()
            return account.received, lost

    def _forget_one(self) -> None:
        """(under the lock) Forget the account away longest."""
        for (peer, run_id), account in self._accounts.items():
            if account.open <= 0:
                del self._accounts[(peer, run_id)]
                if self._last_run.get(peer) == run_id:
                    del self._last_run[peer]
                return

    def receipt(self, peer: str, run_id: str, received: int) -> int:
        """The peer's RECEIPT: how many of the frames we wrote it read.

        Returns how many more frames are now known lost."""
        with self._lock:
            account = self._accounts.get((peer, run_id))
            if account is None:
                return 0  # logon() runs first; an account forgotten in between is not ours
            account.acknowledged = received
            lost = account.written - received - account.lost
            if lost <= 0:
                return 0
            account.lost += lost
            return lost

    def ended(self, peer: str, run_id: str, written: int, received: int) -> None:
        """A connection with ``peer`` (run ``run_id``) ended: add what it wrote and read."""
        with self._lock:
            account = self._accounts.pop((peer, run_id), None)
            if account is None:
                return
            self._accounts[(peer, run_id)] = account  # the most recently used now
            account.written += written
            account.received += received
            account.open -= 1
