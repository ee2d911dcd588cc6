"""Build a :class:`~actorbus.config.schema.BusConfig` from a properties file.

Theory of operation
-------------------
Keys are read under one of two prefixes, ``actorbus.`` or ``eBus.`` (so an
eBus user's file carries over); keys without either prefix are ignored.  What
follows the prefix is one of:

* a *name list*: ``dispatchers``, ``net.selectors``, ``services``,
  ``connections``, ``jrep.gateways``, ``jrep.clients``, ``multicasts``, ``actors``;
* a *per-name setting*: ``SECTION.NAME.SETTING`` where SECTION is
  ``dispatcher``, ``net.selector``, ``service``, ``connection``,
  ``jrep.gateway``, ``jrep.client``, ``multicast`` or ``actor``
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
import operator
import os
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from actorbus._log import logger
from actorbus.config._tables import (
    _ACTORS,
    _CONNECTIONS,
    _DISPATCHERS,
    _GATEWAYS,
    _JREP_CLIENTS,
    _MULTICASTS,
    _SECTIONS,
    _SELECTORS,
    _SERVICES,
    _SPARK,
    _TOP_LEVEL,
    _Section,
)
from actorbus.config._values import _check_name, _Invalid, _resolve, _Setting, _split_list

# re-exported: actorbus.cli imports it from here
from actorbus.config._values import _no_module_hint as _no_module_hint  # noqa: PLC0414
from actorbus.config.properties import Property, format_property, read_properties
from actorbus.config.schema import (
    BusConfig,
    ConnectionConfig,
    DispatcherConfig,
    DispatcherKind,
    SelectorConfig,
    ServiceConfig,
    tls_pair_problem,
)
from actorbus.errors import ConfigError, UsageError

__all__ = [
    "ENV_VAR",
    "PREFIXES",
    "ConfigWarning",
    "config_from_env",
    "config_from_properties",
    "dump_config",
    "load_config",
]


class ConfigWarning(UserWarning):
    """A properties file holds something the loader does not read but probably
    should: a key whose prefix is a typo of ``actorbus.`` or ``eBus.``, or a
    known key written without one.  Shown by default (a ``UserWarning``)."""


#: Key prefixes read by the loader; :func:`dump_config` writes the first.
PREFIXES = ("actorbus.", "eBus.")
#: Environment variable :func:`config_from_env` reads by default.
ENV_VAR = "ACTORBUS_CONFIG"

_T = TypeVar("_T")
_Path = str | os.PathLike[str]

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


#: A setting whose name holds one of these words holds a secret, unless it
#: names a file: its value never appears in a message.
_SECRET_WORDS = ("secret", "token", "password", "passwd", "credential")


def _holds_secret(key: str) -> bool:
    """Whether the value of ``key`` may be a secret (``...secret``, ``...token``,
    but not ``...secretFile``): it is never shown."""
    setting = key.rsplit(".", 1)[-1].lower()
    return any(word in setting for word in _SECRET_WORDS) and not setting.endswith(("file", "dir"))


@dataclass(frozen=True, slots=True)
class _Entry:
    prop: Property
    prefix: str
    #: written as ``service.SETTING`` (the unnamed form).
    unnamed: bool = False

    @property
    def where(self) -> str:
        if _holds_secret(self.prop.key):
            return f"{self.prop.key}=<not shown: it may be a secret>"
        return f"{self.prop.key}={self.prop.value!r}"


@dataclass(frozen=True, slots=True)
class _Names:
    """A parsed name list and where it came from (``entry`` is None when absent)."""

    names: tuple[str, ...]
    entry: _Entry | None
    #: the key to cite in messages, e.g. ``actorbus.dispatchers``.
    key: str


class _Loader:
    def __init__(self, props: Iterable[Property], path: str, base: str | None = None) -> None:
        self.path = path
        #: the directory relative paths are relative to (None: the working directory)
        self.base = base
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
            self._not_ours(prop)
            return
        entry, slot = self._classify(_Entry(prop, prefix))
        if prop.trailing_comment_at is not None:
            comment = prop.value[prop.trailing_comment_at :]
            if _holds_secret(prop.key):
                comment = "<the rest of the value>"
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

    def _not_ours(self, prop: Property) -> None:
        """A key without the prefix is another tool's, unless its prefix is a typo
        of ours or the rest is one of our keys: then say so (once per key)."""
        head, dot, rest = prop.key.partition(".")
        meant: str | None = None
        close = difflib.get_close_matches(head, [p[:-1] for p in PREFIXES], n=1, cutoff=0.75)
        if dot and rest and close and len(head) >= len(close[0]) - 1:
            meant = f"{close[0]}.{rest}"
        elif self._is_our_key(prop.key):
            meant = PREFIXES[0] + prop.key
        if meant is None:
            return
        warnings.warn(
            ConfigWarning(
                f"{self.path}:{prop.line}: {prop.key}: not read: keys start with "
                f"{' or '.join(map(repr, PREFIXES))} (other keys are left to other tools); "
                f"did you mean {meant}?"
            ),
            stacklevel=5,
        )

    def _is_our_key(self, suffix: str) -> bool:
        """Whether ``suffix`` is a key of ours written without the prefix."""
        try:
            _, slot = self._classify(_Entry(Property(suffix, "", 0), ""))
        except ConfigError:
            return False
        return slot[0] != "spark"

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
        if _holds_secret(attr):
            files = [key for key in section.settings if _holds_secret(key.removesuffix("File"))]
            instead = " or ".join(files) or "a file the section reads"
            return self.error(
                entry,
                f"a secret is never written in a properties file (whoever reads the file, "
                f"its copies or its backups has it): put it in a file only this user may "
                f"read (chmod 600) and set {instead} to its path (docs/security.md)",
            )
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
            try:
                built.append(section.factory(name=name, **fields))
            except ConfigError:
                raise
            except UsageError as exc:  # a rule between settings: cite the last key it names
                given_entries = [e for e, _ in values.values()]
                named = [e for attr, (e, _) in values.items() if attr in str(exc)] or given_entries
                raise self.error(named[-1], str(exc)) from None
        if "isDefault" in section.settings:
            built = self._one_default(section, built, given)
        return tuple(built)

    def _parse(self, setting: _Setting, entry: _Entry) -> object:
        text = entry.prop.value
        if setting.path and text and self.base is not None and not os.path.isabs(text):
            resolved = os.path.normpath(os.path.join(self.base, text))
            try:
                return setting.parse(resolved)
            except _Invalid as exc:
                raise self.error(
                    entry,
                    f"{exc} (the path {text!r} is relative to the directory of the "
                    f"properties file: {resolved} was searched)",
                ) from exc.__cause__
        try:
            return setting.parse(text)
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

    def check_tls(
        self, services: tuple[ServiceConfig, ...], connections: tuple[ConnectionConfig, ...]
    ) -> None:
        """TLS keys that only make sense together: a certificate with its key (and
        the key with that certificate), a service's CA with its certificate, a
        connection's certificate and server name with its CA."""
        for service in services:
            s = service.settings
            self._tls_pair("service", service.name, s.tls_cert_file, s.tls_key_file)
            if s.tls_ca_file is not None and s.tls_cert_file is None:
                raise self.error(
                    self._tls_entry("service", service.name, "tlsCaFile"),
                    "verifying the clients' certificates needs a service that speaks TLS; "
                    "set tlsCertFile and tlsKeyFile on this service too",
                )
        for connection in connections:
            c = connection.settings
            self._tls_pair("connection", connection.name, c.tls_cert_file, c.tls_key_file)
            if c.tls_ca_file is not None:
                continue
            for attr in ("tlsCertFile", "tlsKeyFile", "tlsServerName"):
                entry = self.entries.get(("item", "connection", connection.name, attr))
                if entry is not None:
                    raise self.error(
                        entry,
                        "TLS on a connection needs the CA that signs the service's "
                        "certificate (its certificate is always verified): set tlsCaFile on "
                        "this connection too",
                    )

    def _tls_pair(self, noun: str, name: str, cert: _Path | None, key: _Path | None) -> None:
        if cert is not None and key is None:
            raise self.error(
                self._tls_entry(noun, name, "tlsCertFile"),
                "a certificate needs its private key: set tlsKeyFile too",
            )
        if key is not None and cert is None:
            raise self.error(
                self._tls_entry(noun, name, "tlsKeyFile"),
                "a private key needs its certificate: set tlsCertFile too",
            )
        if cert is not None and key is not None:
            problem = tls_pair_problem(os.fspath(cert), os.fspath(key))
            if problem is not None:
                raise self.error(self._tls_entry(noun, name, "tlsKeyFile"), problem)

    def _tls_entry(self, noun: str, name: str, attr: str) -> _Entry:
        return self.entries[("item", noun, name, attr)]

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


def config_from_properties(
    props: Iterable[Property], path: str = "<string>", *, base: str | None = None
) -> BusConfig:
    """Build a :class:`BusConfig` from parsed properties; ``path`` labels errors.
    A relative path in a value (``secretFile``, ``permissionsFile``, the TLS
    files, ``tokenFile``, ``staticDir``) is relative to the directory ``base``
    (:func:`load_config` gives the file's own), else to the working directory.

    Raises :class:`~actorbus.errors.ConfigError` naming file, line and key on
    the first invalid entry.  See docs/configuration.md for every key.
    """
    loader = _Loader(props, path, base)
    loader.parse_lists()
    dispatchers = loader.build(_DISPATCHERS) or BusConfig().dispatchers
    loader.check_pins(dispatchers)
    selectors = loader.build(_SELECTORS)
    loader.check_selector_loops(dispatchers, selectors)
    services = loader.build(_SERVICES)
    connections = loader.build(_CONNECTIONS)
    loader.check_tls(services, connections)
    return BusConfig(
        dispatchers=dispatchers,
        selectors=selectors,
        services=services,
        connections=connections,
        gateways=loader.build(_GATEWAYS),
        jrep_clients=loader.build(_JREP_CLIENTS),
        multicasts=loader.build(_MULTICASTS),
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
    base = os.path.dirname(os.path.abspath(name))
    return config_from_properties(read_properties(name), name, base=base)


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
        (_GATEWAYS, config.gateways),
        (_JREP_CLIENTS, config.jrep_clients),
        (_MULTICASTS, config.multicasts),
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
                value = operator.attrgetter(setting.field)(item)
                text = _format_value(round(value * 1000) if setting.ms else value)
                if text is not None:
                    lines.append(format_property(head + attr, text))
            if section.options_field is not None:
                for key, value in getattr(item, section.options_field).items():
                    lines.append(format_property(head + key, value))
    if config.spark:
        lines += ["", "# spark"]
        lines += [format_property(f"{prefix}{_SPARK}{k}", v) for k, v in config.spark.items()]
    return "\n".join(lines) + "\n"
