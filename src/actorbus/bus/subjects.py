"""Wildcard subject patterns, private topics, and an index matching a subject
against many patterns at once.

Theory of operation
===================

A bus key is a (message class, subject) pair; a :class:`Wildcard` stands for many
subjects.  It has one of two dialects, chosen when it is built.

*levels* (hierarchical): a subject is ``/a/b/c``, a ``/`` before each non-empty level.
In a pattern ``*`` stands for exactly one whole level and ``...`` for one or more
trailing levels: ``/foo/*/bar`` matches ``/foo/x/bar``, not ``/foo/x/y/bar``;
``/foo/...`` matches ``/foo/x`` and ``/foo/x/y``, not ``/foo``.  A pattern starts with
``/``, has no empty level (no ``//``, no trailing ``/``, not a bare ``/``), uses ``*``
and ``...`` only as whole levels (``...`` only last) and holds at least one wildcard;
any other character is plain.  A subject that does not start with ``/`` or has an
empty level matches no levels pattern; a ``*`` in a subject is a plain character.

*prefix* (topic filters): a prefix, maybe empty, with no ``*``, then ``*`` or ``**``.
``foo/bar*`` matches the subjects that start with ``foo/bar`` and have no ``/`` after
it (``foo/bar``, ``foo/bark``; not ``foo/bar/x``); ``foo/bar**`` matches them all.

Private topics: a subject that starts with ``.`` is private
(:func:`new_private_subject`).  No wildcard ever matches one: a prefix pattern starting
with ``.`` is refused, and the empty prefix skips them.  A refused pattern raises
:class:`~actorbus.errors.SubjectPatternError`, naming it, the broken rule and the fix.

:class:`WildcardIndex` costs nothing for the patterns that cannot match a subject:

* levels patterns live in a trie keyed by level (a ``*`` level under the key ``""``,
  which no subject level can be).  A node holds the values of the pattern that ends
  there and of the one that ends there with ``...``.  A subject is walked level by
  level with a list of live nodes (no recursion), stopping when none is live; it is
  split at most once past the deepest pattern, so a deep subject costs one scan.
* prefix patterns live in two dicts (``*`` and ``**``) from prefix to values, each with
  its sorted distinct prefix lengths: a subject costs one look-up of ``subject[:L]``
  per distinct length ``L`` not longer than the subject.

:meth:`WildcardIndex.match` returns values in registration order, sorting only when
more than one pattern matched.
"""

from __future__ import annotations

import itertools
import os
import secrets
import sys
import threading
import warnings
from collections import Counter
from operator import itemgetter
from typing import Any, Generic, NoReturn, TypeVar

from actorbus.errors import SubjectPatternError, UsageError, UsageWarning

__all__ = [
    "Wildcard",
    "WildcardIndex",
    "is_private",
    "new_private_subject",
    "warn_if_star_in_exact_subject",
]

T = TypeVar("T")

_LEVELS = "levels"
_PREFIX = "prefix"
_STAR = "*"
_REST = "..."


def is_private(subject: str) -> bool:
    """True if ``subject`` is a private topic (it starts with ``.``)."""
    return subject.startswith(".")


def new_private_subject() -> str:
    """A new private topic: ``.`` and 24 random hex digits (no ``/`` nor ``*``)."""
    return "." + secrets.token_hex(12)


def _valid_levels_subject(subject: str) -> bool:
    return subject.startswith("/") and not subject.endswith("/") and "//" not in subject


def _levels_fault(text: str, parts: list[str]) -> str | None:
    """The first rule a levels pattern breaks, with its fix, or None."""
    if not text.startswith("/"):
        return f"does not start with '/'; write it from the root: {'/' + (text or 'foo/*')!r}"
    if "" in parts:
        fix = "to match every subject use '/...'" if text == "/" else "remove the extra '/'"
        return f"empty level {parts.index('') + 1} (a doubled, trailing or lone '/'); {fix}"
    for i, part in enumerate(parts):
        if part == _REST and i != len(parts) - 1:
            return "`...` is not the last level; it stands for the trailing levels: '/foo/...'"
        if part != _REST and _REST in part:
            return f"`...` mixed into a level ({part!r}); `...` stands alone as the last level"
        if part != _STAR and _STAR in part:
            return f"`*` mixed into a level ({part!r}); `*` stands alone as a level: '/foo/*'"
    if _STAR not in parts and parts[-1] != _REST:
        return "no wildcard: subscribe to the subject itself"
    return None


def _prefix_fault(text: str) -> str | None:
    """The first rule a prefix pattern breaks, with its fix, or None."""
    if not text.endswith(_STAR):
        return "does not end with '*' or '**'; append '*' (no '/' after) or '**' (anything after)"
    if _STAR in text.rstrip(_STAR) or text.endswith("***"):
        return "`*` before the final '*' or '**'; only the end is a wildcard, drop the other '*'"
    if is_private(text):
        return "starts with '.': a wildcard never matches a private topic; use the exact subject"
    return None


def _check(dialect: str, text: object) -> None:
    fault: str | None
    if not isinstance(text, str):
        fault = f"a pattern is a str, found {type(text).__name__}; pass the pattern's text"
    else:
        fault = (
            _levels_fault(text, text[1:].split("/")) if dialect == _LEVELS else _prefix_fault(text)
        )
    if fault is not None:
        raise SubjectPatternError(f"{dialect} pattern {text!r}: {fault}")


_warned_subjects: set[str] = set()
_warned_lock = threading.Lock()
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn_if_star_in_exact_subject(subject: str) -> None:
    """Warn (:class:`~actorbus.errors.UsageWarning`, once per distinct subject) that
    a subscription's ``str`` subject holding ``*`` is exact, naming the
    :class:`Wildcard` that would match many subjects.

    The rule: a plain ``str`` subject is always exact (a ``*`` in it is a plain
    character); a wildcard is always built explicitly.  The warning points at
    the first caller outside actorbus."""
    if _STAR not in subject:
        return
    with _warned_lock:
        if subject in _warned_subjects:
            return
        _warned_subjects.add(subject)
    if _levels_fault(subject, subject[1:].split("/")) is None:
        fix = f"Wildcard.levels({subject!r})"
    elif _prefix_fault(subject) is None:
        fix = f"Wildcard.prefix({subject!r})"
    else:
        fix = "a Wildcard.levels(...) or Wildcard.prefix(...) pattern (docs/subjects.md)"
    level, frame = 1, sys._getframe(0)
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        _PACKAGE_DIR
    ):
        frame, level = frame.f_back, level + 1
    warnings.warn(
        f"subscription subject {subject!r} is a str, so it is exact: its '*' matches only "
        f"a '*' in a subject, not other subjects; to match many subjects pass {fix} "
        f"instead (from actorbus import Wildcard).  If the '*' is meant literally, "
        f"ignore this UsageWarning with warnings.filterwarnings",
        UsageWarning,
        stacklevel=level,
    )


class Wildcard:
    """An immutable subject pattern; build it with :meth:`levels` or :meth:`prefix`.

    Equal and hashed by ``(dialect, text)``.
    """

    __slots__ = ("_deep", "_hash", "_levels", "_prefix", "_rest", "dialect", "text")

    text: str
    """The pattern as given."""
    dialect: str
    """``"levels"`` or ``"prefix"``."""
    _levels: tuple[str, ...]  # levels: the levels before a final ``...`` (or all)
    _rest: bool  # levels: the pattern ends with ``...``
    _prefix: str  # prefix: the text before the final ``*`` / ``**``
    _deep: bool  # prefix: it ends with ``**``
    _hash: int

    def __init__(self) -> None:
        raise UsageError("build a Wildcard with Wildcard.levels(text) or Wildcard.prefix(text)")

    @classmethod
    def _make(cls, dialect: str, text: str, **parsed: object) -> Wildcard:
        self = cls.__new__(cls)
        fields = {"_levels": (), "_rest": False, "_prefix": "", "_deep": False, **parsed}
        fields.update(dialect=dialect, text=text, _hash=hash((dialect, text)))
        for name, value in fields.items():
            object.__setattr__(self, name, value)
        return self

    @classmethod
    def levels(cls, text: str) -> Wildcard:
        """A hierarchical pattern such as ``/foo/*/bar`` or ``/foo/...``.

        Raises :class:`~actorbus.errors.SubjectPatternError` if ``text`` breaks a rule.
        """
        _check(_LEVELS, text)
        parts = text[1:].split("/")
        rest = parts[-1] == _REST
        return cls._make(_LEVELS, text, _levels=tuple(parts[:-1] if rest else parts), _rest=rest)

    @classmethod
    def prefix(cls, text: str) -> Wildcard:
        """A topic filter: a prefix then ``*`` (no ``/`` after it) or ``**`` (anything).

        Raises :class:`~actorbus.errors.SubjectPatternError` if ``text`` breaks a rule.
        """
        _check(_PREFIX, text)
        deep = text.endswith("**")
        return cls._make(_PREFIX, text, _prefix=text[: -2 if deep else -1], _deep=deep)

    def matches(self, subject: str) -> bool:
        """True if ``subject`` is one of the subjects this pattern stands for."""
        if self.dialect == _PREFIX:
            head = self._prefix
            if not subject.startswith(head) or is_private(subject):
                return False
            return self._deep or subject.find("/", len(head)) < 0
        if not _valid_levels_subject(subject):
            return False
        levels = self._levels
        n = len(levels)
        parts = subject[1:].split("/", n)
        if len(parts) != (n + 1 if self._rest else n):
            return False
        for want, got in zip(levels, parts, strict=False):  # a `...` tail is unmatched
            if want not in (_STAR, got):
                return False
        return True

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"Wildcard is immutable; cannot set {name}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Wildcard is immutable; cannot delete {name}")

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (getattr(Wildcard, self.dialect), (self.text,))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Wildcard):
            return NotImplemented
        return self.dialect == other.dialect and self.text == other.text

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Wildcard.{self.dialect}({self.text!r})"


_Bucket = list[tuple[int, T]]  # (registration number, value), in registration order
_ANY = ""  # the trie key of a `*` level: never a literal level of a pattern nor a subject


class _Node(Generic[T]):
    """A trie node: children by level (``*`` under ``""``), and the values of the
    pattern that ends here (``held[0]``) and of the one that ends here with ``...``
    (``held[1]``)."""

    __slots__ = ("children", "held")

    def __init__(self) -> None:
        self.children: dict[str, _Node[T]] = {}
        self.held: list[_Bucket[T] | None] = [None, None]


class WildcardIndex(Generic[T]):
    """Values registered under wildcards; :meth:`match` finds those whose wildcard
    matches a subject without looking at the others.

    A pattern may hold many values, and the same value more than once (each
    registration counts and is matched on its own).
    """

    def __init__(self) -> None:
        self._buckets: dict[Wildcard, _Bucket[T]] = {}
        self._count = 0
        self._seq = itertools.count()
        self._root: _Node[T] = _Node()
        self._depths: Counter[int] = Counter()  # levels of a levels pattern -> how many
        self._deepest = 0  # max(self._depths), 0 with no levels pattern
        # prefix -> [values of its `*` pattern, of its `**` pattern]
        self._prefixes: dict[str, list[_Bucket[T] | None]] = {}
        self._sizes: Counter[int] = Counter()  # prefix length -> how many prefixes
        self._lengths: list[int] = []  # sorted(self._sizes)

    def add(self, wildcard: Wildcard, value: T) -> None:
        """Register ``value`` under ``wildcard``."""
        if not isinstance(wildcard, Wildcard):
            raise UsageError(
                f"WildcardIndex.add takes a Wildcard, found {type(wildcard).__name__} "
                f"{wildcard!r}; build one with Wildcard.levels(...) or Wildcard.prefix(...)"
            )
        bucket = self._buckets.get(wildcard)
        if bucket is None:
            bucket = self._buckets[wildcard] = []
            self._install(wildcard, bucket)
        bucket.append((next(self._seq), value))
        self._count += 1

    def remove(self, wildcard: Wildcard, value: T) -> None:
        """Remove one registration of ``value`` (compared with ``is``) under ``wildcard``,
        the earliest if there are several.

        Raises :class:`~actorbus.errors.UsageError` if there is none.
        """
        bucket = self._buckets.get(wildcard, [])
        for i, (_, held) in enumerate(bucket):
            if held is value:
                del bucket[i]
                self._count -= 1
                if not bucket:
                    del self._buckets[wildcard]
                    self._uninstall(wildcard)
                return
        raise UsageError(
            f"cannot remove {value!r} from {wildcard!r}: it is not registered under that "
            "wildcard (values are compared by identity); remove only what was added"
        )

    def match(self, subject: str) -> list[T]:
        """The values of every registration whose wildcard matches ``subject``, each
        once, in registration order.  A new list."""
        if not self._count or is_private(subject):
            return []
        found: list[_Bucket[T]] = []
        if self._deepest:
            self._match_levels(subject, found)
        size = len(subject)
        for n in self._lengths:
            if n > size:
                break
            pair = self._prefixes.get(subject[:n])
            if pair is not None:
                one, deep = pair
                if one is not None and subject.find("/", n) < 0:
                    found.append(one)
                if deep is not None:
                    found.append(deep)
        if len(found) <= 1:
            return [value for _, value in found[0]] if found else []
        entries = sorted(itertools.chain.from_iterable(found), key=itemgetter(0))
        return [value for _, value in entries]

    def __len__(self) -> int:
        """The number of (wildcard, value) registrations."""
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def wildcards(self) -> list[Wildcard]:
        """The wildcards holding at least one value, each once, oldest first (a
        wildcard left without values and added again counts as new)."""
        return list(self._buckets)

    # ------------------------------------------------------------------ internals

    def _match_levels(self, subject: str, found: list[_Bucket[T]]) -> None:
        if not _valid_levels_subject(subject):
            return
        # Split at most once past the deepest pattern: a longer tail can only meet
        # a `...`, collected before the walk gets there.
        states = [self._root]
        for level in subject[1:].split("/", self._deepest):
            live: list[_Node[T]] = []
            for node in states:
                if node.held[1] is not None:
                    found.append(node.held[1])
                children = node.children
                if children:
                    child = children.get(level)
                    if child is not None:
                        live.append(child)
                    child = children.get(_ANY)
                    if child is not None:
                        live.append(child)
            if not live:
                return
            states = live
        found.extend(node.held[0] for node in states if node.held[0] is not None)

    def _install(self, wildcard: Wildcard, bucket: _Bucket[T]) -> None:
        if wildcard.dialect == _PREFIX:
            pair = self._prefixes.setdefault(wildcard._prefix, [None, None])
            pair[wildcard._deep] = bucket
            if pair[not wildcard._deep] is None:  # a new prefix
                self._sizes[len(wildcard._prefix)] += 1
                self._lengths = sorted(self._sizes)
            return
        node = self._root
        for level in wildcard._levels:
            node = node.children.setdefault(_ANY if level == _STAR else level, _Node())
        node.held[wildcard._rest] = bucket
        self._depths[len(wildcard._levels) + wildcard._rest] += 1
        self._deepest = max(self._depths)

    def _uninstall(self, wildcard: Wildcard) -> None:
        if wildcard.dialect == _PREFIX:
            pair = self._prefixes[wildcard._prefix]
            pair[wildcard._deep] = None
            if pair == [None, None]:
                del self._prefixes[wildcard._prefix]
                self._sizes[len(wildcard._prefix)] -= 1
                self._sizes = +self._sizes  # drops the lengths no prefix has any more
                self._lengths = sorted(self._sizes)
            return
        path: list[tuple[_Node[T], str]] = []  # (parent, key) down to the pattern's node
        node = self._root
        for level in wildcard._levels:
            key = _ANY if level == _STAR else level
            path.append((node, key))
            node = node.children[key]
        node.held[wildcard._rest] = None
        while path and not node.children and node.held == [None, None]:
            parent, key = path.pop()
            del parent.children[key]
            node = parent
        self._depths[len(wildcard._levels) + wildcard._rest] -= 1
        self._depths = +self._depths
        self._deepest = max(self._depths, default=0)
