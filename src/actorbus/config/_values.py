"""The value parsers of the config loader: one configuration value's text to its value.

Each parser is a :class:`_Setting` row: the dataclass field it fills, a function
from the value's text to the value, and the expected form an error message quotes.
A parser raises :class:`_Invalid` saying what is wrong and what is allowed; the
loader (:mod:`actorbus.config.loader`) adds file, line and key.  They are separate
from the tables that use them (:mod:`actorbus.config._tables`) because they know
nothing of keys or sections: only of one value's text (and, for class paths, of
importing what it names).
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

from actorbus.config._checks import (
    TLS_FILE_KINDS,
    DispatcherKind,
    node_id_problem,
    secret_file_problem,
    tls_file_problem,
)

_WS = " \t\f"
_INT = re.compile(r"[+-]?[0-9]+")
_NAME = re.compile(r"[A-Za-z0-9_-]+")


class _Invalid(Exception):
    """A value did not parse; ``str(exc)`` says what was wrong and what is allowed."""


@dataclass(frozen=True, slots=True)
class _Setting:
    """One row of a section table: the dataclass field, its parser and expected form."""

    field: str
    parse: Callable[[str], object]
    expected: str
    #: noun of the section whose listed names the value must be one of.
    ref: str | None = None
    #: (top-level settings) how dump_config writes None; None: leaves the key out
    none_text: str | None = None
    #: a time: milliseconds in the file, seconds in the field
    ms: bool = False
    #: a path: a relative one is relative to the directory of the properties file
    path: bool = False


def _int_in(text: str, low: int, high: int | None, expected: str) -> int:
    """``text`` as a plain decimal integer in ``low..high``; ``_Invalid(expected)`` if not."""
    if _INT.fullmatch(text) is None:
        raise _Invalid(expected)
    number = int(text)
    if number < low or (high is not None and number > high):
        raise _Invalid(expected)
    return number


def _integer(field: str, low: int, high: int | None = None, unit: str = "") -> _Setting:
    span = f">= {low}" if high is None else f"{low}..{high}"
    expected = f"expected an integer {span}" + (f" ({unit})" if unit else "")

    def parse(text: str) -> int:
        return _int_in(text, low, high, expected)

    return _Setting(field, parse, expected)


_TRUE = frozenset({"true", "yes", "1"})
_FALSE = frozenset({"false", "no", "0"})


def _boolean(field: str) -> _Setting:
    expected = "expected true or false (yes/no and 1/0 are accepted too, in any case)"

    def parse(text: str) -> bool:
        word = text.lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise _Invalid(expected)

    return _Setting(field, parse, expected)


def _kind(field: str) -> _Setting:
    expected = "expected one of " + ", ".join(k.value for k in DispatcherKind) + " (any case)"

    def parse(text: str) -> DispatcherKind:
        try:
            return DispatcherKind.parse(text)
        except ValueError:
            raise _Invalid(expected) from None

    return _Setting(field, parse, expected)


def _host(field: str) -> _Setting:
    expected = "expected a host name or IP address (not empty, no spaces)"

    def parse(text: str) -> str:
        if not text or any(ch.isspace() for ch in text):
            raise _Invalid(expected)
        return text

    return _Setting(field, parse, expected)


def _check_name(text: str) -> str:
    if _NAME.fullmatch(text) is None:
        raise _Invalid(f"{text!r} is not a name; expected letters, digits, '_' and '-' only")
    return text


def _reference(field: str, noun: str) -> _Setting:
    # the listed names are only known per file: the loader checks membership
    return _Setting(field, _check_name, f"expected the name of a configured {noun}", ref=noun)


_BYTE_ORDERS = {"big": "big", "big_endian": "big", "little": "little", "little_endian": "little"}


def _byte_order(field: str) -> _Setting:
    expected = "expected big or little (BIG_ENDIAN and LITTLE_ENDIAN are accepted too)"

    def parse(text: str) -> str:
        order = _BYTE_ORDERS.get(text.lower())
        if order is None:
            raise _Invalid(expected)
        return order

    return _Setting(field, parse, expected)


def _split_list(text: str) -> list[str]:
    """Split a comma list; an empty value is an empty list, an empty item an error."""
    if not text:
        return []
    items = [item.strip(_WS) for item in text.split(",")]
    for position, item in enumerate(items, 1):
        if not item:
            raise _Invalid(
                f"item {position} of {len(items)} is empty; expected a comma list "
                "with no empty items (no ',,' and no trailing ',')"
            )
    return items


_BRACKETED = re.compile(r"\[[^\[\]\s]+\](?::([0-9]+))?")


def _address_filter(field: str) -> _Setting:
    expected = "expected a comma list of hosts ('h') or endpoints ('h:port', port 1..65535)"

    def parse(text: str) -> tuple[str, ...]:
        items = _split_list(text)
        for item in items:
            port: str | None = None
            if item.startswith("["):  # [IPv6] or [IPv6]:port
                match = _BRACKETED.fullmatch(item)
                if match is None:
                    raise _Invalid(f"{item!r} is not a host or host:port; {expected}")
                port = match.group(1)
            elif item.count(":") == 1:  # host:port (a bare IPv6 address has several)
                host, _, port = item.partition(":")
                if not host:
                    raise _Invalid(f"{item!r} has no host before ':'; {expected}")
            if any(ch.isspace() for ch in item):
                raise _Invalid(f"{item!r} holds a space; {expected}")
            if port is not None and (_INT.fullmatch(port) is None or not 1 <= int(port) <= 65535):
                raise _Invalid(f"{item!r} has port {port!r}; {expected}")
        return tuple(items)

    return _Setting(field, parse, expected)


def _gc_threshold(field: str) -> _Setting:
    expected = (
        "expected an integer >= 1 (the young-generation GC threshold while the bus is "
        "open) or none (any case) to leave the garbage collector alone"
    )

    def parse(text: str) -> int | None:
        if text.lower() == "none":
            return None
        return _int_in(text, 1, None, expected)

    return _Setting(field, parse, expected, none_text="none")


def _node_id(field: str) -> _Setting:
    hint = (
        "use a short id unique among the nodes it links to, or leave the key out for "
        "a generated host-pid-random id"
    )
    expected = f"expected 1..255 UTF-8 bytes of text; {hint}"

    def parse(text: str) -> str:
        problem = node_id_problem(text)
        if problem is not None:
            raise _Invalid(f"{problem}; {hint}")
        return text

    return _Setting(field, parse, expected)


def _secret_file(field: str, *, holds_one: bool = True) -> _Setting:
    expected = (
        "expected the path of a file holding the secret (not readable by every user)"
        if holds_one
        else "expected the path of a file of 'node-id = secret' lines (not readable by every user)"
    )

    def parse(text: str) -> str:
        if not text:
            raise _Invalid(expected)
        problem = secret_file_problem(text, holds_one=holds_one)
        if problem is not None:
            raise _Invalid(problem)
        return text

    return _Setting(field, parse, expected, path=True)


def _permissions_file(field: str) -> _Setting:
    expected = (
        "expected the path of a permissions file ('allow|deny ACTIONS PEERS SUBJECT [TYPE]' "
        "lines; its rules are read when the service or connection opens)"
    )

    def parse(text: str) -> str:
        if not text:
            raise _Invalid(expected)
        return _existing_file(text, expected)

    return _Setting(field, parse, expected, path=True)


def _sm_file(field: str) -> _Setting:
    expected = "expected the path of an SMC state machine file (.sm)"

    def parse(text: str) -> str:
        if not text.endswith(".sm"):
            raise _Invalid(f"{text!r}: {expected}")
        return _existing_file(text, expected)

    return _Setting(field, parse, expected, path=True)


def _existing_file(text: str, expected: str) -> str:
    """``text`` when it names a regular file, else ``_Invalid`` saying what it is."""
    if not os.path.isfile(text):
        what = "is not a regular file" if os.path.exists(text) else "does not exist"
        raise _Invalid(f"{text} {what}; {expected}")
    return text


def _record_file(field: str) -> _Setting:
    expected = (
        "expected the path of the file to record the actor to (created or overwritten; "
        "its directory must exist)"
    )

    def parse(text: str) -> str:
        if not text:
            raise _Invalid(expected)
        directory = os.path.dirname(text) or "."
        if not os.path.isdir(directory):
            raise _Invalid(f"{text}: the directory {directory} does not exist; {expected}")
        return text

    return _Setting(field, parse, expected, path=True)


def _tls_file(field: str, kind: str) -> _Setting:
    expected = f"expected the path of the file holding {TLS_FILE_KINDS[kind]}"

    def parse(text: str) -> str:
        if not text:
            raise _Invalid(expected)
        problem = tls_file_problem(text, kind)
        if problem is not None:
            raise _Invalid(problem)
        return text

    return _Setting(field, parse, expected, path=True)


_AUTH_MODES = ("auto", "none")


def _auth(field: str) -> _Setting:
    expected = (
        "expected auto (authenticate: the secret or token configured, else as "
        "docs/security.md says) or none (links or clients without one, knowingly)"
    )

    def parse(text: str) -> str:
        mode = text.lower()
        if mode not in _AUTH_MODES:
            raise _Invalid(expected)
        return mode

    return _Setting(field, parse, expected)


def _origins(field: str) -> _Setting:
    expected = (
        "expected a comma list of origins as browsers send them ('https://app.example.com', "
        "'http://localhost:8080'), or * for any"
    )

    def parse(text: str) -> tuple[str, ...]:
        items = _split_list(text)
        for item in items:
            if item != "*" and _ORIGIN.fullmatch(item) is None:
                raise _Invalid(f"{item!r} is not an origin; {expected}")
        return tuple(items)

    return _Setting(field, parse, expected)


def _url_path(field: str) -> _Setting:
    expected = "expected an absolute URL path such as /jrep (no spaces, no query)"

    def parse(text: str) -> str:
        if _URL_PATH.fullmatch(text) is None or text == "/actorbus.js":
            raise _Invalid(expected + "; /actorbus.js is where the client is served")
        return text

    return _Setting(field, parse, expected)


def _ws_url(field: str) -> _Setting:
    expected = "expected a WebSocket URL such as ws://host:8080/jrep (ws:// or wss://)"

    def parse(text: str) -> str:
        if not text.startswith(("ws://", "wss://")) or " " in text or len(text) < 6:
            raise _Invalid(expected)
        return text

    return _Setting(field, parse, expected)


def _directory(field: str) -> _Setting:
    expected = "expected the path of a directory"

    def parse(text: str) -> str:
        if not text or not os.path.isdir(text):
            what = "is not a directory" if os.path.exists(text) else "does not exist"
            raise _Invalid(f"{text} {what}; {expected}")
        return text

    return _Setting(field, parse, expected, path=True)


_ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://[^\s/?#]+")
_URL_PATH = re.compile(r"/[^\s?#]*")
_MISSING = object()


def _no_module_hint(name: str) -> str:
    """Why module ``name`` does not import when nothing by that name exists, and what to do.

    Names the directories Python searched (``sys.path``; ``''`` is the working
    directory), so a module left in some other directory is easy to spot."""
    searched = dict.fromkeys(os.path.abspath(entry or os.curdir) for entry in sys.path)
    return (
        f"there is no module named {name!r} in the directories Python searched "
        f"({', '.join(searched)}); put it in one of them, add its directory to PYTHONPATH, "
        f"or install its package"
    )


def _resolve(path: str) -> object:
    """Import the object named by the dotted ``path`` (``pkg.module.Name``)."""
    parts = path.split(".")
    if len(parts) < 2 or not all(part.isidentifier() for part in parts):
        raise _Invalid(f"{path!r} is not a dotted path; expected module.Name")
    for cut in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            missing = (exc.name or "") if isinstance(exc, ModuleNotFoundError) else None
            if missing is not None and (
                module_name == missing or module_name.startswith(missing + ".")
            ):
                continue  # no such module: try the shorter prefix
            raise _Invalid(
                f"{path!r} does not import: importing {module_name!r} failed: {exc}"
            ) from exc
        target: object = module
        for attr in parts[cut:]:
            found = getattr(target, attr, _MISSING)
            if found is _MISSING:
                raise _Invalid(f"{path!r} does not import: {module_name!r} has no {attr!r}")
            target = found
        return target
    raise _Invalid(f"{path!r} does not import: {_no_module_hint(parts[0])}")


def _classes(field: str) -> _Setting:
    expected = "expected a comma list of dotted paths of importable classes, e.g. app.actors.Pricer"

    def parse(text: str) -> tuple[str, ...]:
        items = _split_list(text)
        for item in items:
            try:
                target = _resolve(item)
            except _Invalid as exc:
                raise _Invalid(f"{exc}; {expected}") from exc.__cause__
            if not inspect.isclass(target):
                raise _Invalid(f"{item!r} names a {type(target).__name__}, not a class; {expected}")
        return tuple(dict.fromkeys(items))

    return _Setting(field, parse, expected)


def _factory(field: str) -> _Setting:
    expected = "expected the dotted path of an importable Actor class or factory"

    def parse(text: str) -> str:
        try:
            target = _resolve(text)
        except _Invalid as exc:
            raise _Invalid(f"{exc}; {expected}") from exc.__cause__
        if not callable(target):
            raise _Invalid(f"{text!r} names a {type(target).__name__}, not callable; {expected}")
        return text

    return _Setting(field, parse, expected)


def _multicast_group(field: str) -> _Setting:
    expected = "expected an IPv4 multicast address (224.0.0.0 to 239.255.255.255)"

    def parse(text: str) -> str:
        if multicast_group_problem(text) is not None:
            raise _Invalid(expected)
        return text

    return _Setting(field, parse, expected)


def multicast_group_problem(value: object) -> str | None:
    """Why ``value`` is not an IPv4 multicast group address, or None."""
    import ipaddress

    address = None
    if isinstance(value, str):
        try:
            address = ipaddress.IPv4Address(value)
        except ValueError:
            pass
    if address is None or not address.is_multicast:
        return "expected an IPv4 multicast address (224.0.0.0 to 239.255.255.255) as a str"
    return None


def _subject_patterns(field: str) -> _Setting:
    expected = "expected a comma list of subjects or subject patterns ('/prices/...', '/a/*/c', 'prices.**')"

    def parse(text: str) -> tuple[str, ...]:
        items = _split_list(text)
        for item in items:
            if any(ch.isspace() for ch in item):
                raise _Invalid(f"{item!r} holds a space; {expected}")
        return tuple(items)

    return _Setting(field, parse, expected)
