"""The logon handshake as one transition table.

A :class:`~actorbus.net.protocol.LinkProtocol` follows the handshake with two
cursors into the same table, both a :class:`Step`:

* the **parser's** cursor moves as frames arrive (``receive_data``): it says
  which frames are legal next, so a whole batch of bytes is checked before the
  application has looked at any of it;
* the **application's** cursor moves on this side's commands and as the
  application *takes* the events the parser queued (``next_event`` & co.), so
  :attr:`~actorbus.net.protocol.LinkProtocol.state` always agrees with what the
  application has seen.

Both cursors take the two commands that open the handshake (``logon()``,
``accept_logon()``), and the two moves the protocol makes by itself, answering
the peer with no event for the application (the authentication,
:mod:`~actorbus.net._auth`): the server answers LOGON with CHALLENGE
(``PEER_LOGON``), the client answers CHALLENGE with PROOF
(``PEER_CHALLENGE``).  Nothing can wait for the application before either, so
both cursors move at once and the state shown does not change.  A frame from the peer moves the parser's cursor when it
is parsed and the application's when its event is taken — the same move,
:class:`Move` ``PEER_*``, at two times.  Only the application's cursor takes
``receipt()`` and ``complete_logon()``; only the parser's takes the peer's
RECEIPT (taking :class:`~actorbus.net.protocol.ReceiptReceived` moves nothing).

A move the table has no row for is refused: a command raises
:class:`~actorbus.errors.UsageError`, a frame is a protocol error.  Not in the
table: every step goes to ``CLOSED`` on ``logoff()``, ``reject_logon()``, a
LOGOFF, the end of the stream, a timeout or a broken rule (and the
application's cursor on taking ``LogonRejected``, whose frame the table lets
the parser's take); a closed cursor moves no more.

::

    client: IDLE --logon()--> LOGON_SENT --PEER_CHALLENGE--> PROOF_SENT
            --PEER_ACCEPT (its proof good)--> SYNCING
    server: IDLE --PEER_LOGON--> CHALLENGE_SENT --PEER_PROOF (good)--> LOGON_RECEIVED
            --accept_logon()--> SYNCING
    SYNCING --(complete_logon() and PEER_COMPLETE, in either order)--> CONNECTED

A proof that does not match closes the parser's cursor (the application's on
taking :class:`~actorbus.net.protocol.AuthenticationFailed`): no row.  Each step
shows as one :class:`ProtocolState` (``SHOWN``); CHALLENGE_SENT shows as IDLE
and PROOF_SENT as LOGON_SENT (the application has seen nothing of the peer
yet), and the steps between acceptance and CONNECTED all show as SYNCING.
"""

from __future__ import annotations

from enum import Enum
from typing import Final

__all__ = [
    "CAN_SEND",
    "MOVES",
    "OPEN",
    "SHOWN",
    "Move",
    "ProtocolState",
    "Side",
    "Step",
]


class Side(Enum):
    """Which end of the link this object is: the client dialled, the server listened."""

    CLIENT = "client"
    SERVER = "server"


class ProtocolState(Enum):
    """Where the link is in its life, as the application has seen it (see
    :mod:`actorbus.net.protocol` for the moves)."""

    IDLE = "idle"
    LOGON_SENT = "logon sent"
    LOGON_RECEIVED = "logon received"
    SYNCING = "syncing"
    CONNECTED = "connected"
    CLOSED = "closed"


class Step(Enum):
    """A named step of the handshake (one cursor's view, see the module docstring)."""

    #: nothing sent or received yet
    IDLE = "idle"
    #: (client) LOGON sent, no answer yet
    LOGON_SENT = "logon sent"
    #: (server) the client's LOGON is in and answered with CHALLENGE; its PROOF not yet
    CHALLENGE_SENT = "challenge sent"
    #: (client) the server's CHALLENGE is answered with PROOF; no answer yet
    PROOF_SENT = "proof sent"
    #: (server) the client proved its key; its logon is not answered yet
    LOGON_RECEIVED = "logon received"
    #: accepted; nothing of the rest of the handshake yet
    SYNCING = "syncing"
    #: (application) our RECEIPT is sent, our LOGON_COMPLETE not yet
    RECEIPT_SENT = "receipt sent"
    #: (application) our LOGON_COMPLETE is sent, the peer's not taken yet
    COMPLETE_SENT = "complete sent"
    #: (parser) the peer's RECEIPT is in, its LOGON_COMPLETE not yet
    RECEIPT_IN = "receipt in"
    #: the peer's LOGON_COMPLETE is in (parser) / taken (application); ours not sent
    COMPLETE_IN = "complete in"
    #: (application) our RECEIPT sent and the peer's LOGON_COMPLETE taken; ours not sent
    RECEIPT_SENT_COMPLETE_IN = "receipt sent, complete in"
    #: (application) both LOGON_COMPLETEs crossed
    CONNECTED = "connected"
    #: closed (application) / nothing more is parsed (parser)
    CLOSED = "closed"


class Move(Enum):
    """What moves a cursor: a command of this side, or a frame of the peer."""

    #: logon() (client)
    SEND_LOGON = "logon()"
    #: accept_logon() (server)
    SEND_ACCEPT = "accept_logon()"
    #: receipt()
    SEND_RECEIPT = "receipt()"
    #: complete_logon()
    SEND_COMPLETE = "complete_logon()"
    #: the peer's LOGON (server): parsed and answered with CHALLENGE (both cursors)
    PEER_LOGON = "LOGON"
    #: the peer's CHALLENGE (client): parsed and answered with PROOF (both cursors)
    PEER_CHALLENGE = "CHALLENGE"
    #: the peer's PROOF (server), when it matches: parsed / LogonRequested taken
    PEER_PROOF = "PROOF"
    #: the peer's LOGON_ACCEPT (client), when its proof matches: parsed /
    #: LogonAccepted taken
    PEER_ACCEPT = "LOGON_ACCEPT"
    #: the peer's LOGON_REJECT (client): parsed
    PEER_REJECT = "LOGON_REJECT"
    #: the peer's RECEIPT: parsed
    PEER_RECEIPT = "RECEIPT"
    #: the peer's LOGON_COMPLETE: parsed / LogonComplete taken
    PEER_COMPLETE = "LOGON_COMPLETE"


_S = Step
_M = Move

#: (step, move) -> the next step.  Every legal move of the handshake, and no other.
MOVES: Final[dict[tuple[Step, Move], Step]] = {
    # -- before acceptance (both cursors): the authentication, then the answer
    (_S.IDLE, _M.SEND_LOGON): _S.LOGON_SENT,
    (_S.IDLE, _M.PEER_LOGON): _S.CHALLENGE_SENT,
    (_S.LOGON_SENT, _M.PEER_CHALLENGE): _S.PROOF_SENT,
    (_S.CHALLENGE_SENT, _M.PEER_PROOF): _S.LOGON_RECEIVED,
    (_S.LOGON_RECEIVED, _M.SEND_ACCEPT): _S.SYNCING,
    (_S.PROOF_SENT, _M.PEER_ACCEPT): _S.SYNCING,
    # a version the server does not speak is refused before any challenge
    (_S.LOGON_SENT, _M.PEER_REJECT): _S.CLOSED,
    (_S.PROOF_SENT, _M.PEER_REJECT): _S.CLOSED,
    # -- the peer's rest of the handshake (the parser's cursor; the application's
    #    takes PEER_COMPLETE from SYNCING too)
    (_S.SYNCING, _M.PEER_RECEIPT): _S.RECEIPT_IN,
    (_S.SYNCING, _M.PEER_COMPLETE): _S.COMPLETE_IN,
    (_S.RECEIPT_IN, _M.PEER_COMPLETE): _S.COMPLETE_IN,
    # -- ours, and the peer's LOGON_COMPLETE taken (the application's cursor)
    (_S.SYNCING, _M.SEND_RECEIPT): _S.RECEIPT_SENT,
    (_S.SYNCING, _M.SEND_COMPLETE): _S.COMPLETE_SENT,
    (_S.RECEIPT_SENT, _M.SEND_COMPLETE): _S.COMPLETE_SENT,
    (_S.RECEIPT_SENT, _M.PEER_COMPLETE): _S.RECEIPT_SENT_COMPLETE_IN,
    (_S.COMPLETE_IN, _M.SEND_RECEIPT): _S.RECEIPT_SENT_COMPLETE_IN,
    (_S.COMPLETE_IN, _M.SEND_COMPLETE): _S.CONNECTED,
    (_S.RECEIPT_SENT_COMPLETE_IN, _M.SEND_COMPLETE): _S.CONNECTED,
    (_S.COMPLETE_SENT, _M.PEER_COMPLETE): _S.CONNECTED,
}

#: The state each step shows.
SHOWN: Final[dict[Step, ProtocolState]] = {
    _S.IDLE: ProtocolState.IDLE,
    _S.LOGON_SENT: ProtocolState.LOGON_SENT,
    _S.CHALLENGE_SENT: ProtocolState.IDLE,
    _S.PROOF_SENT: ProtocolState.LOGON_SENT,
    _S.LOGON_RECEIVED: ProtocolState.LOGON_RECEIVED,
    _S.SYNCING: ProtocolState.SYNCING,
    _S.RECEIPT_SENT: ProtocolState.SYNCING,
    _S.COMPLETE_SENT: ProtocolState.SYNCING,
    _S.RECEIPT_IN: ProtocolState.SYNCING,
    _S.COMPLETE_IN: ProtocolState.SYNCING,
    _S.RECEIPT_SENT_COMPLETE_IN: ProtocolState.SYNCING,
    _S.CONNECTED: ProtocolState.CONNECTED,
    _S.CLOSED: ProtocolState.CLOSED,
}

#: (application) Steps in which feeds and data may be sent: the logon is accepted.
CAN_SEND: Final = frozenset(s for s, state in SHOWN.items() if state is ProtocolState.SYNCING) | {
    _S.CONNECTED
}

#: (parser) Steps in which the peer may send anything: the logon is accepted.
OPEN: Final = frozenset({_S.SYNCING, _S.RECEIPT_IN, _S.COMPLETE_IN})
