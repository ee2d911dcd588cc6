"""Build a :class:`~actorbus.config.schema.BusConfig` from a properties file.

Theory of operation
-------------------
Keys are read under one of two prefixes, ``actorbus.`` or ``eBus.`` (so an
eBus user's file carries over); keys without either prefix are ignored.  What
follows the prefix is one of:

* a *name list*: ``dispatchers``, ``net.selectors``, ``services``,
  ``connections``, ``actors``;
* a *per-name setting*: ``SECTION.NAME.SETTING`` where SECTION is
  ``dispatcher``, ``net.selector``, ``service``, ``connection`` or ``actor``
  (and ``service.SETTING`` for the single unnamed service ``default``);
* a *top-level setting* of the whole bus: ``gc.threshold``;
* ``spark.KEY``, kept raw for the Spark pipeline.

Loading is three passes over the parsed entries.  *Collect* classifies every
prefixed key into a slot (list, setting, actor option, top-level setting or
spark key), rejects unknown keys with a "did you mean" suggestion and values
carrying a habitual end-of-line comment, and folds together keys that mean the
same slot (the two prefixes, setting aliases, ``service.port`` =
``service.default.port``): the last one wins and the earlier one is logged.
*Lists* parse the name lists.  *Build* checks each per-name setting's name is
listed, parses its value with the setting's entry in one table (setting ->
field, parser, expected form, names it must refer to), fills required settings
and defaults, and makes the frozen dataclasses; a top-level setting is parsed
with its row of a table of its own (key -> field, parser, expected form).
Every error is a :class:`~actorbus.errors.ConfigError` naming the file, line
and key, the value found and what is allowed.

:func:`dump_config` walks the same tables backwards to write a file that loads
back to an equal configuration.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from actorbus._log import logger
from actorbus.config.properties import Property, format_property, read_properties
from actorbus.config.schema import (
    DEFAULT_DISPATCHER,
    ActorConfig,
    BusConfig,
    ConnectionConfig,
    DispatcherConfig,
    DispatcherKind,
    SelectorConfig,
    ServiceConfig,
    node_id_problem,
)
from actorbus.errors import ConfigError

__all__ = [
    "ENV_VAR",
    "PREFIXES",
    "config_from_env",
    "config_from_properties",
    "dump_config",
    "load_config",
]

#: Key prefixes read by the loader; :func:`dump_config` writes the first.
PREFIXES = ("actorbus.", "eBus.")
#: Environment variable :func:`config_from_env` reads by default.
ENV_VAR = "ACTORBUS_CONFIG"

_WS = " \t\f"
_INT = re.compile(r"[+-]?[0-9]+")
_NAME = re.compile(r"[A-Za-z0-9_-]+")
_T = TypeVar("_T")


class _Invalid(Exception):
    """A value did not parse; ``str(exc)`` says what was wrong and what is allowed."""


# ------------------------------------------------------------------ value parsers


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


# ------------------------------------------------------------------------- tables


@dataclass(frozen=True, slots=True)
class _Section(Generic[_T]):
    """How one kind of named item is spelled and built."""

    noun: str  #: used in messages and slots: "dispatcher"
    list_key: str  #: "dispatchers"
    item_prefix: str  #: "dispatcher."
    factory: Callable[..., _T]
    settings: Mapping[str, _Setting]  #: setting as written in files -> row
    aliases: Mapping[str, str] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    #: name given to ``item_prefix + SETTING`` keys (the unnamed service).
    unnamed: str | None = None
    #: dataclass field receiving every unknown setting as a string (actors).
    options_field: str | None = None
    #: names known when the list key is absent (for references only).
    implicit: tuple[str, ...] = ()


def _link_settings() -> dict[str, _Setting]:
    return {
        "inputBufferSize": _integer("input_buffer_size", 0, unit="bytes"),
        "outputBufferSize": _integer("output_buffer_size", 0, unit="bytes"),
        "byteOrder": _byte_order("byte_order"),
        "messageQueueSize": _integer("message_queue_size", 0, unit="messages, 0 = unlimited"),
        "heartbeatDelay": _integer("heartbeat_delay_ms", 0, unit="milliseconds, 0 = off"),
        "heartbeatReplyDelay": _integer("heartbeat_reply_delay_ms", 0, unit="milliseconds"),
        "inputBacklog": _integer("input_backlog", 0, unit="messages, 0 = never pause"),
    }


_DISPATCHERS: _Section[DispatcherConfig] = _Section(
    noun="dispatcher",
    list_key="dispatchers",
    item_prefix="dispatcher.",
    factory=DispatcherConfig,
    settings={
        "runQueueType": _kind("kind"),
        "threadCount": _integer("thread_count", 1),
        "spinLimit": _integer("spin_limit", 0, unit="spins"),
        "parkTime": _integer("park_time_ns", 0, unit="nanoseconds"),
        "priority": _integer("priority", 1, 10),
        "quantum": _integer("quantum_ns", 1, unit="nanoseconds"),
        "isDefault": _boolean("is_default"),
        "classes": _classes("classes"),
    },
    aliases={"numberThreads": "threadCount"},
    implicit=(DEFAULT_DISPATCHER,),
)

_SELECTORS: _Section[SelectorConfig] = _Section(
    noun="selector",
    list_key="net.selectors",
    item_prefix="net.selector.",
    factory=SelectorConfig,
    settings={
        "type": _kind("kind"),
        "isDefault": _boolean("is_default"),
        "priority": _integer("priority", 1, 10),
        "spinLimit": _integer("spin_limit", 0, unit="spins"),
        "parkTime": _integer("park_time_ns", 0, unit="nanoseconds"),
        "dispatcher": _reference("dispatcher", "dispatcher"),
    },
)

_SERVICES: _Section[ServiceConfig] = _Section(
    noun="service",
    list_key="services",
    item_prefix="service.",
    factory=ServiceConfig,
    settings={
        "port": _integer("port", 0, 65535),
        "host": _host("host"),
        "addressFilter": _address_filter("address_filter"),
        "serviceSelector": _reference("service_selector", "selector"),
        "connectionSelector": _reference("connection_selector", "selector"),
        **_link_settings(),
    },
    required=("port",),
    unnamed="default",
)

_CONNECTIONS: _Section[ConnectionConfig] = _Section(
    noun="connection",
    list_key="connections",
    item_prefix="connection.",
    factory=ConnectionConfig,
    settings={
        "host": _host("host"),
        "port": _integer("port", 1, 65535),
        "bindPort": _integer("bind_port", 0, 65535),
        "selector": _reference("selector", "selector"),
        "reconnect": _boolean("reconnect"),
        "reconnectDelay": _integer("reconnect_delay_ms", 0, unit="milliseconds"),
        "connectTimeout": _integer("connect_timeout_ms", 0, unit="milliseconds"),
        **_link_settings(),
    },
    aliases={"reconnectTime": "reconnectDelay"},
    required=("host", "port"),
)

_ACTORS: _Section[ActorConfig] = _Section(
    noun="actor",
    list_key="actors",
    item_prefix="actor.",
    factory=ActorConfig,
    settings={
        "class": _factory("class_path"),
        "dispatcher": _reference("dispatcher", "dispatcher"),
    },
    required=("class",),
    options_field="options",
)

#: In dependency order: references point to earlier sections only.
_SECTIONS: tuple[_Section[Any], ...] = (_DISPATCHERS, _SELECTORS, _SERVICES, _CONNECTIONS, _ACTORS)
_SPARK = "spark."
#: Settings of the whole bus, written right after the prefix (no section, no name).
_TOP_LEVEL: Mapping[str, _Setting] = MappingProxyType(
    {"gc.threshold": _gc_threshold("gc_threshold"), "nodeId": _node_id("node_id")}
)

#: A slot is what a key means: (kind, section noun, item name, setting or key).
_Slot = tuple[str, str, str, str]


def _suggest(suffix: str) -> str | None:
    """The known key closest to ``suffix`` (both without prefix), if any is close."""
    parts = suffix.split(".")
    candidates = [s.list_key for s in _SECTIONS] + list(_TOP_LEVEL)
    for section in _SECTIONS:
        depth = section.item_prefix.count(".")
        spellings = [*section.settings, *section.aliases]
        if len(parts) > depth:
            name = parts[depth]
            candidates += [f"{section.item_prefix}{name}.{attr}" for attr in spellings]
        if section.unnamed is not None:
            candidates += [f"{section.item_prefix}{attr}" for attr in spellings]
    candidates.append(_SPARK + ".".join(parts[1:]) if len(parts) > 1 else _SPARK + "master")
    found = difflib.get_close_matches(suffix, candidates, n=1, cutoff=0.75)
    return found[0] if found else None


# ------------------------------------------------------------------------- loader


@dataclass(frozen=True, slots=True)
class _Entry:
    prop: Property
    prefix: str
    #: written as ``service.SETTING`` (the unnamed form).
    unnamed: bool = False

    @property
    def where(self) -> str:
        return f"{self.prop.key}={self.prop.value!r}"


@dataclass(frozen=True, slots=True)
class _Names:
    """A parsed name list and where it came from (``entry`` is None when absent)."""

    names: tuple[str, ...]
    entry: _Entry | None
    #: the key to cite in messages, e.g. ``actorbus.dispatchers``.
    key: str


class _Loader:
    def __init__(self, props: Iterable[Property], path: str) -> None:
        self.path = path
        self.entries: dict[_Slot, _Entry] = {}
        self.lists: dict[str, _Names] = {}
        for prop in props:
            self._collect(prop)

    # -- errors

    def error(self, entry: _Entry, detail: str) -> ConfigError:
        return ConfigError(
            f"{entry.where}: {detail}", path=self.path, line=entry.prop.line, key=entry.prop.key
        )

    # -- pass 1: collect

    def _collect(self, prop: Property) -> None:
        prefix = next((p for p in PREFIXES if prop.key.startswith(p)), None)
        if prefix is None:
            folded = prop.key.casefold()
            near = next((p for p in PREFIXES if folded.startswith(p.casefold())), None)
            if near is not None:
                entry = _Entry(prop, prop.key[: len(near)])
                raise self.error(
                    entry,
                    f"key prefix {entry.prefix!r} differs from {near!r} only by case; "
                    f"expected {' or '.join(map(repr, PREFIXES))} exactly",
                )
            return  # not ours
        entry, slot = self._classify(_Entry(prop, prefix))
        if prop.trailing_comment_at is not None:
            comment = prop.value[prop.trailing_comment_at :]
            raise self.error(
                entry,
                f"properties files have no end-of-line comments; move {comment!r} to its "
                "own '#' line (or escape it as '\\;' or '\\#' if it belongs to the value)",
            )
        earlier = self.entries.pop(slot, None)
        if earlier is not None:
            logger.warning(
                "{}:{}: {} overrides {} from line {} (the last one wins)",
                self.path,
                prop.line,
                prop.key,
                earlier.prop.key,
                earlier.prop.line,
            )
        self.entries[slot] = entry

    def _classify(self, entry: _Entry) -> tuple[_Entry, _Slot]:
        suffix = entry.prop.key[len(entry.prefix) :]
        for section in _SECTIONS:
            if suffix == section.list_key:
                return entry, ("list", section.noun, "", "")
        if suffix in _TOP_LEVEL:
            return entry, ("top", "", "", suffix)
        if suffix.startswith(_SPARK) and len(suffix) > len(_SPARK):
            return entry, ("spark", "", "", suffix[len(_SPARK) :])
        for section in _SECTIONS:
            if not suffix.startswith(section.item_prefix):
                continue
            rest = suffix[len(section.item_prefix) :]
            name, dot, attr = rest.partition(".")
            if not dot and section.unnamed is not None:
                name, attr = section.unnamed, rest
                entry = dataclasses.replace(entry, unnamed=True)
            if attr:
                canonical = section.aliases.get(attr, attr)
                if canonical in section.settings:
                    return entry, ("item", section.noun, name, canonical)
                if section.options_field is not None and name:
                    return entry, ("option", section.noun, name, attr)
                if name:
                    raise self._unknown_setting(entry, section, attr)
            form = f"{entry.prefix}{section.item_prefix}NAME.SETTING"
            raise self.error(entry, f"incomplete key; expected {form}")
        suggestion = _suggest(suffix)
        hint = (
            f"did you mean {entry.prefix + suggestion!r}?"
            if suggestion
            else "expected one of the keys in docs/configuration.md"
        )
        raise self.error(entry, f"unknown key under {entry.prefix!r}; {hint}")

    def _unknown_setting(self, entry: _Entry, section: _Section[Any], attr: str) -> ConfigError:
        spellings = [*section.settings, *section.aliases]
        close = difflib.get_close_matches(attr, spellings, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return self.error(
            entry,
            f"unknown {section.noun} setting {attr!r}; {hint}expected one of "
            + ", ".join(spellings),
        )

    # -- pass 2: name lists

    def parse_lists(self) -> None:
        for section in _SECTIONS:
            entry = self.entries.get(("list", section.noun, "", ""))
            if entry is None:
                implicit = section.implicit
                if section.unnamed is not None and any(
                    e.unnamed for slot, e in self.entries.items() if slot[1] == section.noun
                ):
                    implicit = (section.unnamed,)
                self.lists[section.noun] = _Names(implicit, None, PREFIXES[0] + section.list_key)
                continue
            try:
                items = _split_list(entry.prop.value)
                for item in items:
                    _check_name(item)
            except _Invalid as exc:
                raise self.error(entry, str(exc)) from None
            if not items and section is _DISPATCHERS:
                raise self.error(entry, "expected a comma list of one or more dispatcher names")
            names = tuple(dict.fromkeys(items))
            for name in names:
                if (count := items.count(name)) > 1:
                    logger.warning(
                        "{}:{}: {} lists {!r} {} times; the repeats are ignored",
                        self.path,
                        entry.prop.line,
                        entry.prop.key,
                        name,
                        count,
                    )
            self.lists[section.noun] = _Names(names, entry, entry.prop.key)

    # -- pass 3: build

    def build(self, section: _Section[_T]) -> tuple[_T, ...]:
        listed = self.lists[section.noun]
        given: dict[str, dict[str, tuple[_Entry, object]]] = {}
        options: dict[str, dict[str, str]] = {}
        for (kind, noun, name, attr), entry in self.entries.items():
            if noun != section.noun or kind == "list":
                continue
            if name in listed.names and (listed.entry is not None or entry.unnamed):
                pass  # listed, or the unnamed service standing in for an absent list
            elif listed.entry is None:
                raise self.error(
                    entry,
                    f"{section.noun} {name!r} is not listed in {entry.prefix}{section.list_key}, "
                    f"which the file does not set; add {entry.prefix}{section.list_key}={name}",
                )
            else:
                raise self.error(
                    entry,
                    f"{section.noun} {name!r} is not listed in {listed.key} (line "
                    f"{listed.entry.prop.line}: {', '.join(listed.names) or 'no names'}); "
                    "add it to that list",
                )
            if kind == "option":
                options.setdefault(name, {})[attr] = entry.prop.value
            elif kind == "item":
                given.setdefault(name, {})[attr] = (entry, self._value(section, attr, entry))
        built: list[_T] = []
        # an absent list builds nothing (the caller supplies the default dispatcher),
        # unless the unnamed service was configured
        for name in listed.names if listed.entry is not None or given else ():
            values = given.get(name, {})
            for attr in section.required:
                if attr not in values:
                    raise self._missing(section, name, attr)
            fields: dict[str, object] = {
                section.settings[attr].field: value for attr, (_, value) in values.items()
            }
            if section.options_field is not None:
                fields[section.options_field] = MappingProxyType(options.get(name, {}))
            built.append(section.factory(name=name, **fields))
        if "isDefault" in section.settings:
            built = self._one_default(section, built, given)
        return tuple(built)

    def _parse(self, setting: _Setting, entry: _Entry) -> object:
        try:
            return setting.parse(entry.prop.value)
        except _Invalid as exc:
            raise self.error(entry, str(exc)) from exc.__cause__
        except Exception as exc:  # user code run by an import: keep it, say where
            exc.add_note(f"while loading {self.path}:{entry.prop.line}: {entry.prop.key}")
            raise

    def _value(self, section: _Section[Any], attr: str, entry: _Entry) -> object:
        setting = section.settings[attr]
        value = self._parse(setting, entry)
        if setting.ref is not None:
            target = self.lists[setting.ref]
            if value not in target.names:
                if target.entry is None:
                    only = f", so the only one is {target.names[0]!r}" if target.names else ""
                    known = f"{target.key} is not set{only}"
                else:
                    names = ", ".join(target.names) or "none"
                    known = f"{target.key} (line {target.entry.prop.line}) lists: {names}"
                raise self.error(entry, f"{setting.expected}; {known}")
        return value

    def _missing(self, section: _Section[Any], name: str, attr: str) -> ConfigError:
        listed = self.lists[section.noun]
        if listed.entry is not None:
            prefix, line = listed.entry.prefix, listed.entry.prop.line
            origin = f"listed in {listed.key} on this line"
        else:  # the unnamed service: cite its first key
            first = next(e for s, e in self.entries.items() if s[1] == section.noun)
            prefix, line = first.prefix, first.prop.line
            origin = f"configured from line {line}"
        item = "" if listed.entry is None and section.unnamed == name else f"{name}."
        key = f"{prefix}{section.item_prefix}{item}{attr}"
        return ConfigError(
            f"{key}: missing; {section.noun} {name!r} ({origin}) needs it: "
            f"{section.settings[attr].expected}",
            path=self.path,
            line=line,
            key=key,
        )

    def _one_default(
        self,
        section: _Section[_T],
        built: list[Any],
        given: Mapping[str, Mapping[str, tuple[_Entry, object]]],
    ) -> list[Any]:
        first: str | None = None
        for item in built:
            name: str = item.name
            if not item.is_default:
                continue
            if first is not None:
                entry = given[name]["isDefault"][0]
                line = given[first]["isDefault"][0].prop.line
                raise self.error(
                    entry,
                    f"{section.noun} {first!r} is already the default (line {line}); "
                    f"expected isDefault=true on one {section.noun} only",
                )
            first = name
        if first is None and built:
            built[0] = dataclasses.replace(built[0], is_default=True)
        return built

    def check_pins(self, dispatchers: tuple[DispatcherConfig, ...]) -> None:
        """A class may be pinned to one dispatcher only."""
        owner: dict[object, tuple[str, str, int]] = {}
        for dispatcher in dispatchers:
            if not dispatcher.classes:
                continue
            entry = self.entries[("item", "dispatcher", dispatcher.name, "classes")]
            for path in dispatcher.classes:
                target = _resolve(path)
                other, other_path, line = owner.get(target, (dispatcher.name, path, 0))
                if other != dispatcher.name:
                    alias = f", as {other_path!r}" if other_path != path else ""
                    raise self.error(
                        entry,
                        f"class {path!r} is already pinned to dispatcher {other!r} "
                        f"(line {line}{alias}); expected each class on one dispatcher only",
                    )
                owner[target] = (dispatcher.name, path, entry.prop.line)

    def check_selector_loops(
        self, dispatchers: tuple[DispatcherConfig, ...], selectors: tuple[SelectorConfig, ...]
    ) -> None:
        """A selector can share the event loop of an asyncio dispatcher only, and
        selectors sharing one loop must poll it the same way (a loop polls one way)."""
        kinds = {d.name: d.kind for d in dispatchers}
        first: dict[str, SelectorConfig] = {}
        for selector in selectors:
            if selector.dispatcher is None:
                continue
            kind = kinds[selector.dispatcher]
            if kind is not DispatcherKind.ASYNCIO:
                entry = self.entries[("item", "selector", selector.name, "dispatcher")]
                raise self.error(
                    entry,
                    f"dispatcher {selector.dispatcher!r} is a {kind.value} dispatcher, which "
                    "has no event loop to share; expected the name of an asyncio dispatcher "
                    f"(set {entry.prefix}dispatcher.{selector.dispatcher}.runQueueType=asyncio)",
                )
            other = first.setdefault(selector.dispatcher, selector)
            if other.polling != selector.polling:
                raise self._polls_differently(selector, other)

    def _polls_differently(self, selector: SelectorConfig, other: SelectorConfig) -> ConfigError:
        """``selector`` shares ``other``'s loop but says another polling: cite the
        setting that differs (on ``selector`` if the file sets it there, else on
        ``other``, else ``selector``'s ``dispatcher`` line)."""
        if other.polling.split()[0] != selector.polling.split()[0]:
            attr = "type"
        elif other.spin_limit != selector.spin_limit:
            attr = "spinLimit"
        else:
            attr = "parkTime"
        entry = (
            self.entries.get(("item", "selector", selector.name, attr))
            or self.entries.get(("item", "selector", other.name, attr))
            or self.entries[("item", "selector", selector.name, "dispatcher")]
        )
        dispatcher_key = ("item", "selector", other.name, "dispatcher")
        line = self.entries[dispatcher_key].prop.line
        return self.error(
            entry,
            f"selectors {other.name!r} (line {line}) and {selector.name!r} share the event "
            f"loop of dispatcher {selector.dispatcher!r} but poll it differently "
            f"({other.name}: {other.polling}; {selector.name}: {selector.polling}); one "
            "loop polls one way: expected the same type, spinLimit and parkTime on every "
            f"selector of dispatcher {selector.dispatcher!r}",
        )

    def top_level(self) -> dict[str, Any]:
        """The top-level settings the file sets, as :class:`BusConfig` fields."""
        fields: dict[str, Any] = {}
        for (kind, _, _, key), entry in self.entries.items():
            if kind == "top":
                setting = _TOP_LEVEL[key]
                fields[setting.field] = self._parse(setting, entry)
        return fields

    def spark(self) -> Mapping[str, str]:
        return MappingProxyType(
            {slot[3]: e.prop.value for slot, e in self.entries.items() if slot[0] == "spark"}
        )


# -------------------------------------------------------------------------- public


def config_from_properties(props: Iterable[Property], path: str = "<string>") -> BusConfig:
    """Build a :class:`BusConfig` from parsed properties; ``path`` labels errors.

    Raises :class:`~actorbus.errors.ConfigError` naming file, line and key on
    the first invalid entry.  See docs/configuration.md for every key.
    """
    loader = _Loader(props, path)
    loader.parse_lists()
    dispatchers = loader.build(_DISPATCHERS) or BusConfig().dispatchers
    loader.check_pins(dispatchers)
    selectors = loader.build(_SELECTORS)
    loader.check_selector_loops(dispatchers, selectors)
    return BusConfig(
        dispatchers=dispatchers,
        selectors=selectors,
        services=loader.build(_SERVICES),
        connections=loader.build(_CONNECTIONS),
        actors=loader.build(_ACTORS),
        spark=loader.spark(),
        **loader.top_level(),
        source=path,
    )


def load_config(path: str | os.PathLike[str]) -> BusConfig:
    """Read the properties file at ``path`` (UTF-8) into a :class:`BusConfig`.

    Raises :class:`~actorbus.errors.ConfigError` if the file cannot be read or
    holds an invalid entry; the message names file, line and key.
    """
    name = os.fspath(path)
    return config_from_properties(read_properties(name), name)


def config_from_env(var: str = ENV_VAR) -> BusConfig:
    """Load the file named by the environment variable ``var``.

    Unset or empty: the default ``BusConfig()`` (one blocking dispatcher).
    Naming a missing file is a :class:`~actorbus.errors.ConfigError`.
    """
    value = os.environ.get(var, "")
    if not value:
        return BusConfig()
    if not os.path.isfile(value):
        raise ConfigError(
            f"{var}={value!r}: no such file; expected the path of a .properties file "
            f"(unset {var} to use the default configuration)",
            key=var,
        )
    return load_config(value)


def _format_value(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, DispatcherKind):
        return value.value
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def dump_config(config: BusConfig) -> str:
    """Write ``config`` as properties text that :func:`load_config` reads back
    to an equal configuration (``source`` aside).  Every setting is written,
    defaults included, so the output doubles as a reference."""
    prefix = PREFIXES[0]
    lines = ["# actorbus configuration, written by actorbus.config.dump_config"]
    for key, setting in _TOP_LEVEL.items():
        text = _format_value(getattr(config, setting.field))
        if text is None:
            text = setting.none_text
        if text is None:
            lines += ["", f"# {key}: not set"]
        else:
            lines += ["", f"# {key}", format_property(prefix + key, text)]
    groups: tuple[tuple[_Section[Any], tuple[Any, ...]], ...] = (
        (_DISPATCHERS, config.dispatchers),
        (_SELECTORS, config.selectors),
        (_SERVICES, config.services),
        (_CONNECTIONS, config.connections),
        (_ACTORS, config.actors),
    )
    for section, items in groups:
        if not items:
            continue
        lines += ["", f"# {section.list_key}"]
        lines.append(format_property(prefix + section.list_key, ",".join(i.name for i in items)))
        for item in items:
            head = f"{prefix}{section.item_prefix}{item.name}."
            for attr, setting in section.settings.items():
                text = _format_value(getattr(item, setting.field))
                if text is not None:
                    lines.append(format_property(head + attr, text))
            if section.options_field is not None:
                for key, value in getattr(item, section.options_field).items():
                    lines.append(format_property(head + key, value))
    if config.spark:
        lines += ["", "# spark"]
        lines += [format_property(f"{prefix}{_SPARK}{k}", v) for k, v in config.spark.items()]
    return "\n".join(lines) + "\n"
