"""How a settings field is declared (:func:`setting`) and checked: the metadata
every field of :mod:`actorbus.config.settings` carries — its properties key
(the camelCase of the attribute), unit, meaning, parser and check — and the
base class that validates a settings object from it when it is made.  Apart
from the types themselves so that each stays a short list of fields."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from actorbus.config._values import _integer, _Invalid, _Setting
from actorbus.errors import UsageError

__all__ = [
    "SettingInfo",
    "Settings",
    "bool_check",
    "choice",
    "file_value",
    "host_check",
    "int_row",
    "key_of",
    "name_check",
    "number_check",
    "parsed_check",
    "path_check",
    "path_setting",
    "setting",
    "settings_fields",
    "strings_check",
]

_META = "actorbus.setting"


@dataclass(frozen=True, slots=True)
class SettingInfo:
    """What :func:`setting` puts on a field: everything but the default."""

    #: the properties key after ``service.NAME.`` (camelCase of the attribute)
    key: str
    #: what the setting means, for the docs table
    doc: str
    #: the unit of the Python attribute ("seconds", "bytes", ...), "" for none
    unit: str
    #: how a properties value becomes the attribute's value (given the attribute
    #: name, it returns the loader's row: parser and expected form)
    row: Callable[[str], _Setting] | None
    #: the Python value -> why it is not allowed, or None
    check: Callable[[Any], str | None]
    #: times: seconds in Python, milliseconds in a properties file
    ms: bool = False
    #: older spellings of the key a properties file may still use
    aliases: tuple[str, ...] = ()


def key_of(attribute: str) -> str:
    """The properties key of an attribute: ``max_patterns`` -> ``maxPatterns``."""
    head, *rest = attribute.split("_")
    return head + "".join(part.capitalize() for part in rest)


def setting(
    default: Any,
    *,
    doc: str,
    unit: str = "",
    low: float | None = None,
    high: int | None = None,
    ms: bool = False,
    zero: str = "",
    row: Callable[[str], _Setting] | None = None,
    check: Callable[[Any], str | None] | None = None,
    aliases: tuple[str, ...] = (),
    repr: bool = True,
) -> Any:
    """A settings field: ``default``, with its properties key, unit, meaning and
    parser on the field's metadata (see the module docstring).

    ``low``/``high`` bound an integer (or, with ``ms``, a time in seconds);
    ``row`` makes the loader's parser when the value is not a plain integer or
    time; ``check`` validates a value given in code when the bounds do not."""
    if check is None:
        check = _time_check(low) if ms else _int_check(low, high, unit)
    if row is None:
        floor = int(low if low is not None else 0)
        row = _ms_row(1 if low else 0, zero) if ms else int_row(floor, high, unit)
    info = SettingInfo("", doc, unit, row, check, ms, aliases)
    return dataclasses.field(default=default, repr=repr, metadata={_META: info})


def path_setting(*, row: Callable[[str], _Setting], doc: str) -> Any:
    """A setting holding a file's path (None: not set): relative to the properties
    file's directory in a file, checked when the settings are made."""
    return setting(None, check=path_check, unit="path", row=row, doc=doc)


def int_row(low: int, high: int | None, unit: str) -> Callable[[str], _Setting]:
    return lambda name: _integer(name, low, high, unit=unit)


def _ms_row(low: int, zero: str) -> Callable[[str], _Setting]:
    def row(name: str) -> _Setting:
        ints = _integer(name, low, unit="milliseconds" + (f", 0 = {zero}" if zero else ""))

        def parse(text: str) -> float:
            milliseconds = ints.parse(text)
            assert isinstance(milliseconds, int)
            return milliseconds / 1000

        return _Setting(name, parse, ints.expected, ms=True)

    return row


def _int_check(low: float | None, high: int | None, unit: str) -> Callable[[Any], str | None]:
    span = f">= {low:g}" if high is None else f"{low:g}..{high}"
    what = f"expected an int {span}" + (f" ({unit})" if unit else "")

    def check(value: Any) -> str | None:
        bad = type(value) is not int or (low is not None and value < low)
        return what if bad or (high is not None and value > high) else None

    return check


def _time_check(low: float | None) -> Callable[[Any], str | None]:
    positive = low is not None and low > 0
    what = (
        "expected a finite number of seconds "
        + ("> 0" if positive else ">= 0 (0 switches it off)")
        + "; a properties file gives it in milliseconds"
    )

    def check(value: Any) -> str | None:
        if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
            return what
        return what if positive and value <= 0 else None

    return check


def bool_check(value: Any) -> str | None:
    return None if isinstance(value, bool) else "expected True or False"


def path_check(value: Any) -> str | None:
    if value is None or isinstance(value, (str, os.PathLike)):
        return None
    return "expected a path (str or os.PathLike) or None"


def name_check(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value):
        return None
    return "expected the name of a selector (net.selectors) or None for the default one"


def choice(*allowed: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value in allowed else "expected " + " or ".join(map(repr, allowed))

    return check


def strings_check(value: Any) -> str | None:
    if isinstance(value, tuple) and all(isinstance(item, str) for item in value):
        return None
    return "expected a tuple of str (any iterable of str is turned into one)"


def host_check(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value and not any(c.isspace() for c in value)):
        return None
    return "expected a host name or IP address (not empty, no spaces) or None"


def settings_fields(cls: type) -> tuple[tuple[dataclasses.Field[Any], SettingInfo], ...]:
    """The fields of settings type ``cls`` that are settings, with their metadata
    (the key filled in from the attribute), in declaration order."""
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = _settings_fields(cls)
    return found


_FIELDS: dict[type, tuple[tuple[dataclasses.Field[Any], SettingInfo], ...]] = {}


def _settings_fields(cls: type) -> tuple[tuple[dataclasses.Field[Any], SettingInfo], ...]:
    found = []
    for f in dataclasses.fields(cls):
        info = f.metadata.get(_META)
        if info is not None:
            found.append((f, dataclasses.replace(info, key=key_of(f.name))))
    return tuple(found)


class Settings:
    """What every settings type does with its fields' metadata."""

    __slots__ = ()

    def __post_init__(self) -> None:
        cls = type(self)
        for f, info in settings_fields(cls):
            value = getattr(self, f.name)
            if (
                isinstance(f.default, tuple)
                and isinstance(value, Iterable)
                and not isinstance(value, (str, bytes, tuple))
            ):
                value = tuple(value)
                object.__setattr__(self, f.name, value)
            problem = info.check(value)
            if problem is not None:
                shown = "<hidden>" if not f.repr else repr(value)
                raise UsageError(
                    f"{cls.__name__}({f.name}={shown}): {problem} "
                    f"(the properties key {info.key}{' in milliseconds' if info.ms else ''})"
                )


def parsed_check(row: _Setting, value: Any) -> str | None:
    if not isinstance(value, str):
        return row.expected
    try:
        row.parse(value)
    except _Invalid as exc:
        return str(exc)
    return None


def number_check(value: Any, unit: str) -> str | None:
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        return f"expected a finite number >= 0 ({unit})"
    return None


def file_value(info: SettingInfo, value: Any) -> str | None:
    """``value`` as a properties file writes it (None: the key is left out)."""
    if value is None:
        return None
    if info.ms:
        return str(round(value * 1000))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)
