"""Authorization per key: which peers may publish, subscribe, request and reply
on which keys.

A :class:`Permissions` is an ordered list of rules, and roles (named groups of
node ids).  Each rule reads::

    allow|deny  ACTIONS  PEERS  SUBJECT  [TYPE]

* ``ACTIONS``: ``publish``, ``subscribe``, ``request``, ``reply``, several joined
  by commas, or ``*`` for all four;
* ``PEERS``: node ids and ``@role`` names joined by commas, or ``*`` for every peer;
* ``SUBJECT``: ``*`` for every subject (private topics included); a wildcard
  (:class:`~actorbus.bus.subjects.Wildcard`): a levels pattern when it starts
  with ``/`` and has a ``*`` level or ends with ``/...`` (``/fx/...``,
  ``/fx/*/bid``), else a prefix pattern when it ends with ``*`` (``fx.**``,
  ``fx.*``); anything else is one exact subject;
* ``TYPE`` (optional): a message type name (``fx.Quote``), a prefix of type names
  ending with ``*`` (``fx.*``), or ``*`` (every type, the default).

What each action stands for, from the peer's side:

=============  ====================================================  ============================
action         the peer may ...                                      checked when the peer sends
=============  ====================================================  ============================
``publish``    send notifications on the key (its publishers here)   an advertisement (publisher)
``subscribe``  receive this node's notifications on the key          a subscription, a pattern
                                                                     subscription (each key it
                                                                     matches), a queue-group join
``request``    send requests to this node's repliers of the key      its first request on the key
``reply``      answer this node's requests on the key                an advertisement (replier)
=============  ====================================================  ============================

The **first** rule whose action, peer, subject and type all match decides; when
none does, the peer is refused (a permissions list allows what it says and
nothing else: end it with ``allow * * *`` to allow the rest).  With no
permissions at all (the default) every peer may do everything.

A file holds one rule per line, ``role NAME = node-id node-id ...`` lines, blank
lines and ``#`` comments; :meth:`Permissions.from_file` reads it and names the
file and line of a line it cannot read (with the configuration key, when one
is given).

:meth:`Permissions.for_peer` gives the rules that concern one node id, in
order (:class:`PeerPermissions`); the transport seam (``bus/party.py``) asks it
at each advertisement, subscription, pattern, group join and first request.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ..errors import ConfigError, SubjectPatternError, UsageError
from .subjects import Wildcard

if TYPE_CHECKING:
    from .message import MessageKey

__all__ = ["Action", "PeerPermissions", "Permissions", "Rule"]


class Action(enum.Enum):
    """What a peer does on a key (see the module docstring)."""

    PUBLISH = "publish"
    SUBSCRIBE = "subscribe"
    REQUEST = "request"
    REPLY = "reply"


_ALL_ACTIONS: Final = frozenset(Action)
_ANY: Final = "*"
_VERDICTS: Final = {"allow": True, "deny": False}
#: what a refusal names when no rule matched
DEFAULT_DENY: Final = "no rule allows it (a permissions list refuses what it does not allow)"


def _subject_matcher(text: str) -> Wildcard | str | None:
    """``*`` -> None (any subject); a wildcard; else the exact subject.
    Raises SubjectPatternError for a malformed pattern."""
    if text == _ANY:
        return None
    if text.startswith("/"):
        levels = text[1:].split("/")
        if _ANY in levels or any("..." in level for level in levels):
            return Wildcard.levels(text)
    if text.endswith(_ANY):
        return Wildcard.prefix(text)
    return text


@dataclass(frozen=True, slots=True)
class Rule:
    """One allow/deny rule (see the module docstring); made by
    :meth:`Rule.parse` from its text.  ``where`` says where it was written
    (``file:line``), for refusals and errors."""

    allow: bool
    actions: frozenset[Action]
    #: node ids, ``@role`` names, or ``("*",)``
    peers: tuple[str, ...]
    #: the subject field as written
    subject: str
    #: the type field as written (``*``: any type)
    type_name: str = _ANY
    where: str = ""
    _subject: Wildcard | str | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_subject", _subject_matcher(self.subject))

    @classmethod
    def parse(cls, text: str, where: str = "") -> Rule:
        """A rule from its text, e.g. ``"allow publish node-a /fx/..."``; raises
        UsageError naming what is wrong and how to write it."""
        words = text.split()
        if len(words) not in (4, 5):
            raise UsageError(
                f"rule {text.strip()!r} has {len(words)} fields; expected "
                "'allow|deny ACTIONS PEERS SUBJECT [TYPE]', e.g. 'allow publish node-a /fx/...'"
            )
        verdict, actions_text, peers_text, subject = words[:4]
        type_name = words[4] if len(words) == 5 else _ANY
        if verdict.lower() not in _VERDICTS:
            raise UsageError(
                f"rule {text.strip()!r} starts with {verdict!r}; expected allow or deny"
            )
        actions: set[Action] = set()
        for name in actions_text.split(","):
            if name == _ANY:
                actions.update(_ALL_ACTIONS)
                continue
            try:
                actions.add(Action(name.lower()))
            except ValueError:
                raise UsageError(
                    f"rule {text.strip()!r}: unknown action {name!r}; expected publish, "
                    "subscribe, request, reply (joined by commas) or *"
                ) from None
        peers = tuple(peers_text.split(","))
        for peer in peers:
            if not peer or peer == "@":
                raise UsageError(
                    f"rule {text.strip()!r}: empty peer in {peers_text!r}; expected node ids "
                    "and @role names joined by commas, or *"
                )
        if type_name != _ANY and _ANY in type_name.rstrip(_ANY):
            raise UsageError(
                f"rule {text.strip()!r}: type {type_name!r} has a '*' before its end; a type "
                "is a type name, a prefix ending with '*', or *"
            )
        try:
            return cls(
                _VERDICTS[verdict.lower()], frozenset(actions), peers, subject, type_name, where
            )
        except SubjectPatternError as exc:
            raise UsageError(f"rule {text.strip()!r}: subject {exc}") from None

    @property
    def text(self) -> str:
        """The rule as a line of a permissions file."""
        if self.actions == _ALL_ACTIONS:
            actions = _ANY
        else:
            actions = ",".join(a.value for a in Action if a in self.actions)
        verdict = "allow" if self.allow else "deny"
        tail = f" {self.type_name}" if self.type_name != _ANY else ""
        return f"{verdict} {actions} {','.join(self.peers)} {self.subject}{tail}"

    def __str__(self) -> str:
        return f"{self.where}: {self.text}" if self.where else self.text

    def matches(self, action: Action, key: MessageKey) -> bool:
        """True if this rule speaks of ``action`` on ``key`` (its peers aside)."""
        if action not in self.actions:
            return False
        wanted = self.type_name
        if wanted != _ANY:
            name = key.type_name
            if wanted.endswith(_ANY):
                if not name.startswith(wanted[:-1]):
                    return False
            elif name != wanted:
                return False
        matcher = self._subject
        if matcher is None:
            return True
        if type(matcher) is str:
            return key.subject == matcher
        return matcher.matches(key.subject)  # type: ignore[union-attr]


class Permissions:
    """Ordered allow/deny rules and roles (see the module docstring).

    ``rules``: :class:`Rule` objects or their text (``"allow publish node-a
    /fx/..."``); ``roles``: role name -> node ids, named ``@name`` in a rule's
    peers.  Raises UsageError (ConfigError from :meth:`from_file`) naming the
    rule and what is wrong."""

    def __init__(
        self,
        rules: Iterable[Rule | str] = (),
        roles: Mapping[str, Iterable[str]] | None = None,
        *,
        source: str = "",
    ) -> None:
        self.roles: dict[str, frozenset[str]] = {
            name: frozenset(ids) for name, ids in (roles or {}).items()
        }
        parsed: list[Rule] = []
        for i, rule in enumerate(rules, 1):
            if isinstance(rule, str):
                rule = Rule.parse(rule, where=f"rule {i}")
            elif not isinstance(rule, Rule):
                raise UsageError(
                    f"Permissions rule {i} is a {type(rule).__name__}; pass a Rule or the "
                    "rule's text, e.g. 'allow publish node-a /fx/...'"
                )
            for peer in rule.peers:
                if peer.startswith("@") and peer[1:] not in self.roles:
                    known = ", ".join(sorted(self.roles)) or "none"
                    raise UsageError(
                        f"{rule}: role {peer[1:]!r} is not defined (roles: {known}); define "
                        f"it with roles={{{peer[1:]!r}: [...]}} or a 'role {peer[1:]} = ...' line"
                    )
            parsed.append(rule)
        self.rules: tuple[Rule, ...] = tuple(parsed)
        #: where the rules came from (a file's path), for repr
        self.source = source

    def __repr__(self) -> str:
        where = f" from {self.source}" if self.source else ""
        return f"<Permissions{where}: {len(self.rules)} rules, {len(self.roles)} roles>"

    @classmethod
    def parse(cls, text: str, source: str = "<text>", key: str | None = None) -> Permissions:
        """Rules and roles from the text of a permissions file (see the module
        docstring); a line it cannot read is a ConfigError naming ``source``,
        the line and ``key``."""
        rules: list[Rule] = []
        roles: dict[str, frozenset[str]] = {}
        role_lines: dict[str, int] = {}
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            where = f"{source}:{number}"
            try:
                if line.split(None, 1)[0].lower() == "role":
                    name, ids = _role_line(line)
                    if name in roles:
                        raise UsageError(
                            f"role {name!r} is defined twice (first at line "
                            f"{role_lines[name]}); give it every node id on one line"
                        )
                    roles[name], role_lines[name] = ids, number
                else:
                    rules.append(Rule.parse(line, where=where))
            except UsageError as exc:
                raise ConfigError(
                    f"{exc}{_KEY_HINT.format(key) if key else ''}",
                    path=source,
                    line=number,
                    key=key,
                ) from None
        for rule in rules:
            for peer in rule.peers:
                if peer.startswith("@") and peer[1:] not in roles:
                    line_no = int(rule.where.rsplit(":", 1)[1])
                    known = ", ".join(sorted(roles)) or "none"
                    raise ConfigError(
                        f"rule {rule.text!r} names role {peer[1:]!r}, which no 'role "
                        f"{peer[1:]} = node-id ...' line defines (roles: {known})"
                        f"{_KEY_HINT.format(key) if key else ''}",
                        path=source,
                        line=line_no,
                        key=key,
                    )
        return cls(rules, roles, source=source)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], key: str | None = None) -> Permissions:
        """Read a permissions file; ``key`` (``actorbus.service.NAME.permissionsFile``)
        is named in its errors."""
        name = os.fspath(path)
        try:
            with open(name, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            what = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ConfigError(
                f"cannot read the permissions file ({what}); give the path of a readable "
                "UTF-8 file of 'allow|deny ACTIONS PEERS SUBJECT [TYPE]' lines"
                f"{_KEY_HINT.format(key) if key else ''}",
                path=name,
                key=key,
            ) from None
        return cls.parse(text, name, key)

    def for_peer(self, node_id: str) -> PeerPermissions:
        """The rules that concern node ``node_id``, in order."""
        mine = []
        for rule in self.rules:
            for peer in rule.peers:
                if peer in {_ANY, node_id} or (
                    peer.startswith("@") and node_id in self.roles.get(peer[1:], ())
                ):
                    mine.append(rule)
                    break
        return PeerPermissions(node_id, tuple(mine))


_KEY_HINT = " (set by {})"


def _role_line(line: str) -> tuple[str, frozenset[str]]:
    head, sep, ids = line.partition("=")
    words = head.split()
    if not sep or len(words) != 2 or not ids.split():
        raise UsageError(
            f"role line {line!r}; expected 'role NAME = node-id node-id ...' (at least one id)"
        )
    return words[1], frozenset(ids.split())


class PeerPermissions:
    """The rules of one peer: :meth:`decide` says whether it may take an action on
    a key, and which rule said so."""

    __slots__ = ("node_id", "rules")

    def __init__(self, node_id: str, rules: tuple[Rule, ...]) -> None:
        self.node_id = node_id
        self.rules = rules

    def decide(self, action: Action, key: MessageKey) -> Rule | None:
        """The first rule about ``action`` on ``key``, None when none is (refused)."""
        for rule in self.rules:
            if rule.matches(action, key):
                return rule
        return None

    def allows(self, action: Action, key: MessageKey) -> bool:
        rule = self.decide(action, key)
        return rule is not None and rule.allow
