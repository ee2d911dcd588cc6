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

Accounts are kept for the node's lifetime (one small record per peer node ever
linked).  Thread-safe: links of one node run on different I/O threads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["Receipts"]


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


class Receipts:
    """The receipt accounts of one node, by peer node id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._accounts: dict[str, _Account] = {}

    def logon(self, peer: str, run_id: str) -> tuple[int, int]:
        """A connection with ``peer`` (run ``run_id``) was accepted.

        Returns the count to send in our RECEIPT, and how many frames written to
        an earlier run of the peer (it restarted) are now known lost."""
        with self._lock:
            account = self._accounts.get(peer)
            if account is not None and account.run_id == run_id:
                return account.received, 0
            lost = 0
            if account is not None:
                lost = max(0, account.written - account.acknowledged - account.lost)
            self._accounts[peer] = _Account(run_id)
            return 0, lost

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
            account = self._accounts.get(peer)
            if account is not None and account.run_id == run_id:
                account.written += written
                account.received += received
