"""A remote peer's wildcard pattern on this node (:class:`PatternWatch`): what
the router's wildcard index holds for a party's pattern subscription."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .message import Message, MessageKey
from .subjects import Wildcard

if TYPE_CHECKING:
    from .party import RemoteParty

__all__ = ["PatternWatch"]


class PatternWatch:
    """A peer's wildcard pattern on this node: the router calls :meth:`matched`
    for each key the pattern matches (those there when the peer subscribed and
    each new one), and the party keeps a proxy subscriber for it."""

    __slots__ = ("keys", "message_class", "narrowed", "party", "wildcard")

    def __init__(
        self, party: RemoteParty, message_class: type[Message], wildcard: Wildcard
    ) -> None:
        self.party = party
        self.message_class = message_class
        self.wildcard = wildcard
        self.keys: set[MessageKey] = set()
        #: a key it matched was held back by the permissions (reported once)
        self.narrowed = False

    def matched(self, key: MessageKey) -> None:
        """(under the router lock) Follow ``key``, if the peer may subscribe to it."""
        party = self.party
        if key not in self.keys and party._attached and party._narrowed(self, key):
            self.keys.add(key)
            party._ref_sub(key)
