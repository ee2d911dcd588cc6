"""Per-peer accounts that turn RECEIPT frames into the sender's ``lost`` counter.

A node keeps one account per peer node id, for the peer's current *run* (the
run id of its LOGON / LOGON_ACCEPT).  When a connection with the
peer ends, its data frames written and read are added to the account.  At each
logon the node sends the peer, in RECEIPT, the frames it has read from that
run so far; the peer's RECEIPT says how many of ours it has read, so
``written - received`` is what the earlier connections lost in flight.

* ``lost`` is counted once per frame: each receipt adds only
  ``written - received - lost_so_far`` (never negative).
* A peer whose run id changed restarted: its count of what it read from us
  started again at 0.  What was written to the old run and not covered by
  its last receipt can no longer be confirmed, so it is counted lost, and the
  account starts afresh (so does our count of what we read from it).
* A receipt above what we wrote cannot be explained by a correct peer (or a
  connection of ours not ended yet, which only a crossed dial can cause); it
  adds nothing, and the next receipt settles the account.

Accounts are bounded: at most :data:`MAX_ACCOUNTS` are kept; past it the
account of the peer that has been away longest (no open connection, least
recently logged on or ended) is forgotten.  A forgotten peer that comes back
is a stranger to the accounts: nothing is counted lost here for its earlier
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
    """The receipt accounts of one node, by peer node id."""

    def __init__(self, most: int = MAX_ACCOUNTS) -> None:
        self._lock = threading.Lock()
        #: by peer node id, least recently used first
        self._accounts: dict[str, _Account] = {}
        self._most = most

    def __len__(self) -> int:
        with self._lock:
            return len(self._accounts)

    def logon(self, peer: str, run_id: str) -> tuple[int, int]:
        """A connection with ``peer`` (run ``run_id``) was accepted.

        Returns the count to send in our RECEIPT, and how many frames written to
        an earlier run of the peer (it restarted) are now known lost."""
        with self._lock:
            accounts = self._accounts
            account = accounts.pop(peer, None)
            if account is not None and account.run_id == run_id:
                account.open += 1
                accounts[peer] = account  # the most recently used now
                return account.received, 0
            lost = 0
            if account is not None:
                lost = max(0, account.written - account.acknowledged - account.lost)
            accounts[peer] = _Account(run_id, open=1)
            if len(accounts) > self._most:
                self._forget_one()
            return 0, lost

    def _forget_one(self) -> None:
        """(under the lock) Forget the account of the peer away longest."""
        for peer, account in self._accounts.items():
            if account.open <= 0:
                del self._accounts[peer]
                return

    def receipt(self, peer: str, run_id: str, received: int) -> int:
        """The peer's RECEIPT: how many of the frames we wrote it read.

        Returns how many more frames are now known lost."""
        with self._lock:
            account = self._accounts.get(peer)
            if account is None or account.run_id != run_id:
                return 0  # logon() runs first; a run changing in between is not ours
            account.acknowledged = received
            lost = account.written - received - account.lost
            if lost <= 0:
                return 0
            account.lost += lost
            return lost

    def ended(self, peer: str, run_id: str, written: int, received: int) -> None:
        """A connection with ``peer`` ended: add what it wrote and read."""
        with self._lock:
            account = self._accounts.pop(peer, None)
            if account is None:
                return
            self._accounts[peer] = account  # the most recently used now
            if account.run_id == run_id:
                account.written += written
                account.received += received
                account.open -= 1
