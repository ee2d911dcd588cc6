"""A remote party's authorization: its link's permissions asked once per
decision, refusals counted, logged and reported.

With permissions, the party asks them once per decision, never per message:
when the peer advertises publishers (``publish``) or repliers (``reply``), subscribes
(``subscribe``), joins a queue group (``subscribe``), or sends its first request on a key
(``request``). A refused advertisement makes no proxy, so the peer's notifications on that key
are dropped as "unexpected" and this node's requests never go to its repliers; a refused
subscription or group join makes no proxy subscriber, so nothing is sent to it; a refused
request is acknowledged with no replier. A pattern subscription is narrowed, not refused: it
follows only the keys the peer may subscribe to (the first key held back is reported once per
pattern). Each refusal is counted (``refused``), logged at most once per period per peer
(``router.peer_log``), and reported once per action and key with an ``AccessRefused`` system
notification (``router.system_publish``, which the node installs). A transport that answers
its peer message by message, saying why one was refused (the J.REP gateway's ``Refused``
error), asks the same rule first with :meth:`RemoteParty.refusal`; it never reads the
permissions itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._log import shown
from ..errors import Error
from .permissions import DEFAULT_DENY, Action
from .system import SYSTEM_SUBJECT, AccessRefused

if TYPE_CHECKING:
    from ._watch import PatternWatch
    from .message import MessageKey

__all__ = ["MAX_REFUSALS_TOLD", "Authorization"]

#: AccessRefused notifications a party publishes at most (one per action and
#: key); refusals past it are still counted and logged.
MAX_REFUSALS_TOLD = 4_096


class Authorization:
    """What :class:`~actorbus.bus.party.RemoteParty` asks of its permissions."""

    router: Any
    name: str
    _perm: Any
    refused: int
    _told: set[tuple[Action, str]]

    def refusal(self, action: Action, key: MessageKey) -> str | None:
        """(a question, not a frame) None when the peer may take ``action`` on
        ``key``; else why not (the refusing rule), the refusal counted, logged and
        reported exactly as the inbound calls do.  For a transport that tells its
        peer why a message was refused before it makes the inbound call (which
        checks again by itself, so asking is never needed for safety)."""
        perm = self._perm
        if perm is None:
            return None
        rule = perm.decide(action, key)
        if rule is not None and rule.allow:
            return None
        why = str(rule) if rule is not None else DEFAULT_DENY
        self._refuse(action, str(key), why)
        return why

    def _permits(self, action: Action, key: MessageKey) -> bool:
        """True if the permissions let the peer take ``action`` on ``key``; else
        the refusal is counted, logged and reported."""
        return self.refusal(action, key) is None

    def _refuse(self, action: Action, what: str, rule: str) -> None:
        self.refused += 1
        self.router.peer_log.warning(
            (self.name, "refused"),
            "remote node {}: may not {} {}, refused by {}",
            self.name,
            action.value,
            what,
            rule,
        )
        told = (action, what)
        if told in self._told or len(self._told) >= MAX_REFUSALS_TOLD:
            return
        self._told.add(told)
        publish = self.router.system_publish
        if publish is not None:
            try:
                publish(
                    AccessRefused(
                        SYSTEM_SUBJECT,
                        peer_node=self.name,
                        action=action.value,
                        key=what,
                        rule=rule,
                    )
                )
            except Error:  # the bus is closing: nobody is listening
                pass

    def _narrowed(self, watch: PatternWatch, key: MessageKey) -> bool:
        """(under the lock) True if ``watch``'s pattern may follow ``key``; the
        first key a pattern is refused is reported once (for the pattern)."""
        perm = self._perm
        if perm is None:
            return True
        rule = perm.decide(Action.SUBSCRIBE, key)
        if rule is not None and rule.allow:
            return True
        if not watch.narrowed:
            watch.narrowed = True
            what = f"{watch.message_class.__type_name__}:{shown(watch.wildcard.text)} (pattern)"
            self._refuse(
                Action.SUBSCRIBE,
                what,
                f"{rule if rule is not None else DEFAULT_DENY}; the pattern follows only "
                f"the keys it allows (first held back: {key})",
            )
        return False
