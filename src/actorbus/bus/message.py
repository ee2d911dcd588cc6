"""Typed, immutable messages: ``Notification``, ``Request``, ``Reply`` and ``Field`` structs.

Theory of operation
-------------------
A message class is a class statement with annotations::

    class DataPoint(Notification):
        value: int
        source: str | None = None

When that statement runs, the metaclass:

1. resolves the annotations (strings too, from ``from __future__ import
   annotations``) and compiles each into a :class:`~._types.FieldType`; an
   unsupported type, a name that clashes with a base field, a leading underscore
   or a bad ``replies=`` list is a :class:`~actorbus.DeclarationError` naming the
   class and the field;
2. lays the fields out in *declaration order, base classes first* —
   ``subject, timestamp, value, source`` above.  That order is the positional
   constructor and the wire order;
3. generates ``__new__`` as Python source, compiled once, with the native type
   checks inlined (``type(v) is int``), so construction costs about what a
   hand-written constructor would;
4. registers the class under its stable *type name* (``module.QualName`` unless
   ``type_name=`` is given), the only thing that identifies a class on the wire.

Instances are ``tuple`` subclasses with no ``__dict__``: immutable, compact,
hashable when every field is, compared by class *and* values, and packed by
msgpack as arrays with no conversion step.  Field values are read through C-level
tuple getters, so ``msg.value`` is as fast as a namedtuple attribute.  A sequence
field always holds a ``tuple`` (a ``list`` argument is copied into one).

The per-class codec (:meth:`Message._ab_codec`) is generated lazily on first use,
or eagerly by :func:`actorbus.bus.codec.compile`.
"""

from __future__ import annotations

import enum
import json
import re
import sys
import time
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..errors import CodecError, DeclarationError, ValidationError
from ._types import (
    ALLOWED_TYPES_TEXT,
    FieldType,
    UnsupportedType,
    _BigInt,
    _Int,
    _Mismatch,
    compile_type,
)

try:  # the C accessor namedtuple uses; fall back to operator.itemgetter
    from collections import _tuplegetter  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - other Python implementations
    from operator import itemgetter as _itemgetter

    def _tuplegetter(index: int, doc: str) -> Any:
        return property(_itemgetter(index), doc=doc)


__all__ = [
    "Field",
    "FieldSpec",
    "Message",
    "MessageKey",
    "Notification",
    "Reply",
    "ReplyStatus",
    "Request",
    "lookup_type",
    "registered_types",
]

M = TypeVar("M", bound="Message")

_MISSING: Any = type("_Missing", (), {"__repr__": lambda self: "<missing>", "__slots__": ()})()
_TS_MAX = (1 << 63) - 1
_CLASSVAR = re.compile(r"^\s*(typing\.|t\.)?ClassVar\b")


class ReplyStatus(enum.IntEnum):
    """Status carried by every reply."""

    #: this replier is done; the reply carries its (last) answer.
    OK_FINAL = 0
    #: more replies will follow from this replier.
    OK_CONTINUING = 1
    #: the replier rejected or failed the request; final for that replier.
    ERROR = 2

    @property
    def is_final(self) -> bool:
        return self is not ReplyStatus.OK_CONTINUING


class FieldSpec(typing.NamedTuple):
    """One declared field: name, position, compiled type, default."""

    name: str
    index: int
    type: FieldType
    default: Any
    owner: str

    @property
    def required(self) -> bool:
        return self.default is _MISSING


# --------------------------------------------------------------------------- registry

_REGISTRY: dict[str, type[Field | Message]] = {}


def lookup_type(type_name: str) -> type[Message | Field] | None:
    """The message or field class registered under ``type_name``, or None.

    Decoding never imports anything a peer names: only classes already defined
    in this process can be found."""
    return _REGISTRY.get(type_name)


def registered_types() -> Mapping[str, type[Message | Field]]:
    """A read-only view of every registered type name → class."""
    return dict(_REGISTRY)


def _register(cls: type[Message | Field]) -> None:
    name = cls.__type_name__
    old = _REGISTRY.get(name)
    if old is not None and old is not cls:
        same_place = old.__module__ == cls.__module__ and old.__qualname__ == cls.__qualname__
        if not same_place:
            raise DeclarationError(
                f"{cls.__qualname__}: type name {name!r} is already used by "
                f"{old.__module__}.{old.__qualname__}; give one of them a distinct "
                f"type_name= in the class statement"
            )
    _REGISTRY[name] = cls


# ------------------------------------------------------------------------- metaclass


def _resolve_annotations(
    name: str, ns: dict[str, Any], module: str, frame_locals: Mapping[str, Any]
) -> dict[str, Any]:
    raw: dict[str, Any] = dict(ns.get("__annotations__", {}))
    if not raw:
        return {}
    module_globals = dict(getattr(sys.modules.get(module), "__dict__", {}))
    localns = dict(frame_locals)
    localns.update({k: v for k, v in ns.items() if not k.startswith("__")})
    resolved: dict[str, Any] = {}
    for field_name, annotation in raw.items():
        if field_name.startswith("__") or (
            isinstance(annotation, str) and _CLASSVAR.match(annotation)
        ):
            continue
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, module_globals, localns)
            except Exception as exc:
                raise DeclarationError(
                    f"{name}.{field_name}: cannot resolve annotation {raw[field_name]!r} "
                    f"({type(exc).__name__}: {exc}); define the type before the class "
                    f"(recursive structs are not supported)"
                ) from exc
        resolved[field_name] = annotation
    return resolved


class _MessageMeta(type):
    """Builds message and field classes: layout, validation, generated constructor."""

    def __new__(
        mcs,
        name: str,
        bases: tuple[type, ...],
        ns: dict[str, Any],
        *,
        replies: Iterable[type] | None = None,
        type_name: str | None = None,
        **kwargs: Any,
    ) -> _MessageMeta:
        ns.setdefault("__slots__", ())
        frame_locals = sys._getframe(1).f_locals
        annotations = _resolve_annotations(name, ns, ns.get("__module__", ""), frame_locals)

        parent_fields: tuple[FieldSpec, ...] = ()
        for base in bases:
            if isinstance(base, _MessageMeta):
                parent_fields = base.__fields__
                break

        own: list[tuple[str, FieldType, Any]] = []
        taken = {f.name for f in parent_fields}
        for field_name, annotation in annotations.items():
            if typing.get_origin(annotation) is ClassVar or annotation is ClassVar:
                continue
            where = f"{name}.{field_name}"
            if field_name.startswith("_"):
                raise DeclarationError(
                    f"{where}: field names may not start with '_' (reserved for the "
                    f"runtime); rename the field"
                )
            if field_name in taken:
                raise DeclarationError(
                    f"{where}: clashes with the base field {field_name!r} of "
                    f"{_field_owner(parent_fields, field_name)}; rename the field"
                )
            try:
                ftype = compile_type(annotation)
            except UnsupportedType as exc:
                raise DeclarationError(
                    f"{where}: unsupported field type {exc}; allowed: {ALLOWED_TYPES_TEXT}"
                ) from None
            default: Any = _MISSING
            if field_name in ns:
                raw_default = ns.pop(field_name)
                try:
                    default = ftype.check(raw_default)
                except _Mismatch as exc:
                    raise DeclarationError(
                        f"{where}: default value {raw_default!r} does not fit: {exc.describe()}"
                    ) from None
            elif ftype.optional:
                default = None
            own.append((field_name, ftype, default))
            taken.add(field_name)

        fields = list(parent_fields)
        for field_name, ftype, default in own:
            fields.append(FieldSpec(field_name, len(fields), ftype, default, name))
        for spec in fields[len(parent_fields) :]:
            ns[spec.name] = _tuplegetter(spec.index, f"{spec.name}: {spec.type.display}")
        ns["__fields__"] = tuple(fields)
        ns["__field_names__"] = tuple(f.name for f in fields)
        ns["_ab_compiled"] = None

        cls = super().__new__(mcs, name, bases, ns, **kwargs)
        if not parent_fields and not fields and name in {"Message", "Field"}:
            # the two roots: no registry entry, no constructor of their own
            return cls
        module = ns.get("__module__", "")
        cls.__type_name__ = type_name or f"{module}.{ns.get('__qualname__', name)}"
        _install_request_replies(cls, bases, replies)
        cls.__new__ = _make_new(cls)  # type: ignore[method-assign]
        _register(cls)  # type: ignore[arg-type]
        return cls


def _field_owner(fields: Iterable[FieldSpec], name: str) -> str:
    for f in fields:
        if f.name == name:
            return f.owner
    return "?"


def _install_request_replies(cls: Any, bases: tuple[type, ...], replies: Any) -> None:
    if replies is None:
        return
    if not any(isinstance(b, type) and issubclass(b, Request) for b in bases if b is not object):
        raise DeclarationError(
            f"{cls.__qualname__}: replies= is only allowed on Request subclasses"
        )
    try:
        listed = tuple(replies)
    except TypeError:
        raise DeclarationError(
            f"{cls.__qualname__}: replies= must be a tuple of Reply subclasses, found {replies!r}"
        ) from None
    for reply in listed:
        if not (isinstance(reply, type) and issubclass(reply, Reply)):
            raise DeclarationError(
                f"{cls.__qualname__}: replies= names {reply!r}, which is not a Reply "
                f"subclass; list only Reply subclasses (the base Reply is always allowed)"
            )
    cls.__replies__ = frozenset(cls.__replies__) | frozenset(listed)


# ------------------------------------------------------------------ generated __new__


def _checker(cls_name: str, spec: FieldSpec) -> Callable[[Any, Any], Any]:
    check = spec.type.check
    where = f"{cls_name}.{spec.name}"

    def slow_check(cls: type, value: Any) -> Any:
        if value is _MISSING:
            raise ValidationError(
                f"{cls.__qualname__}: missing required field {spec.name!r} "
                f"({spec.type.display}); pass it by keyword or position"
            )
        try:
            return check(value)
        except _Mismatch as exc:
            raise ValidationError(f"{cls.__qualname__}.{spec.name}: {exc.describe()}") from None

    slow_check.__qualname__ = f"check[{where}]"
    return slow_check


def _check_timestamp(cls: type, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _TS_MAX:
        return int(value)
    raise ValidationError(
        f"{cls.__qualname__}.timestamp: expected int epoch milliseconds in 0..2**63-1, "
        f"found {type(value).__name__} {value!r}"
    )


_NATIVE_NAMES = {bool: "bool", int: "int", float: "float", str: "str", bytes: "bytes"}


def _make_new(cls: Any) -> Callable[..., Any]:
    """Generate ``__new__`` with parameters named like the fields (runtime names in
    the generated code all start with ``_``, which field names may not)."""
    fields: tuple[FieldSpec, ...] = cls.__fields__
    env: dict[str, Any] = {
        "_new": tuple.__new__,
        "_now": time.time_ns,
        "_cts": _check_timestamp,
    }
    params: list[str] = []
    body: list[str] = []
    for spec in fields:
        arg = spec.name
        env[f"_d_{arg}"] = spec.default
        env[f"_c_{arg}"] = _checker(cls.__qualname__, spec)
        if arg == "timestamp" and spec.index == 1 and hasattr(cls, "__family__"):
            params.append(f"{arg}=None")
            body.append(f"    if {arg} is None: {arg} = _now() // 1000000")
            body.append(f"    elif type({arg}) is not int or {arg} < 0: {arg} = _cts(_cls, {arg})")
            continue
        params.append(f"{arg}=_d_{arg}")
        ptype = spec.type.python_type
        if spec.type.native and ptype in _NATIVE_NAMES:
            tname = _NATIVE_NAMES[ptype]
            env[f"_t_{tname}"] = ptype
            test = f"type({arg}) is not _t_{tname}"
            if spec.type.optional:
                test = f"{arg} is not None and {test}"
            body.append(f"    if {test}: {arg} = _c_{arg}(_cls, {arg})")
        elif spec.type.optional:
            body.append(f"    if {arg} is not None: {arg} = _c_{arg}(_cls, {arg})")
        else:
            body.append(f"    {arg} = _c_{arg}(_cls, {arg})")
    values = ", ".join(f.name for f in fields)
    if len(fields) == 1:
        values += ","
    src = (
        f"def __new__(_cls, {', '.join(params)}):\n"
        + ("\n".join(body) + "\n" if body else "")
        + f"    return _new(_cls, ({values}))\n"
    )
    exec(compile(src, f"<actorbus generated {cls.__qualname__}.__new__>", "exec"), env)
    new = env["__new__"]
    new.__qualname__ = f"{cls.__qualname__}.__new__"
    new.__doc__ = f"{cls.__qualname__}({', '.join(f.name for f in fields)})"
    return typing.cast(Callable[..., Any], new)


# ------------------------------------------------------------------------- message key


_KEY_TEXT = re.compile(r'^(?P<type>[^:"\s][^:"]*):(?P<subject>".*")$', re.DOTALL)


class MessageKey(typing.NamedTuple):
    """(message class, subject): the unit of routing.

    ``str(key)`` reads ``DataPoint:"/demo"`` with the class's type name; :meth:`parse`
    reads it back given the registered types."""

    message_class: type[Message]
    subject: str

    def __str__(self) -> str:
        return f"{self.message_class.__type_name__}:{json.dumps(self.subject, ensure_ascii=False)}"

    def __repr__(self) -> str:
        return f"MessageKey({self})"

    @property
    def type_name(self) -> str:
        return self.message_class.__type_name__

    @classmethod
    def of(cls, message: Message) -> MessageKey:
        """The key a message travels on."""
        return cls(type(message), message.subject)

    @classmethod
    def parse(
        cls, text: str, registry: Mapping[str, type[Message | Field]] | None = None
    ) -> MessageKey:
        """Parse ``TypeName:"subject"``.  The type is looked up by full type name,
        else by unique class name, in ``registry`` (default: every registered type)."""
        from ..errors import UsageError

        match = _KEY_TEXT.match(text.strip())
        if match is None:
            raise UsageError(
                f'cannot parse message key {text!r}; expected TypeName:"subject" '
                f"with the subject in double quotes"
            )
        try:
            subject = json.loads(match["subject"])
        except ValueError:
            raise UsageError(
                f"message key {text!r}: the subject is not a valid quoted string"
            ) from None
        types = registry if registry is not None else _REGISTRY
        type_text = match["type"]
        found = types.get(type_text)
        if found is None:
            candidates = [c for c in types.values() if c.__name__ == type_text]
            if len(candidates) == 1:
                found = candidates[0]
            elif len(candidates) > 1:
                names = sorted(c.__type_name__ for c in candidates)
                raise UsageError(f"message key {text!r}: {type_text!r} is ambiguous: {names}")
        if found is None or not (isinstance(found, type) and issubclass(found, Message)):
            raise UsageError(
                f"message key {text!r}: no message class named {type_text!r} is registered; "
                f"import the module that defines it first"
            )
        return cls(found, subject)


# ------------------------------------------------------------------------- base classes


class _Record(tuple):  # type: ignore[type-arg]
    """Shared behaviour of messages and field structs."""

    __slots__ = ()
    __fields__: ClassVar[tuple[FieldSpec, ...]] = ()
    __field_names__: ClassVar[tuple[str, ...]] = ()
    __type_name__: ClassVar[str]
    _ab_compiled: ClassVar[Any]

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and tuple.__eq__(self, other)  # type: ignore[arg-type]

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        parts = ", ".join(f"{n}={v!r}" for n, v in zip(self.__field_names__, self, strict=True))
        return f"{type(self).__qualname__}({parts})"

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(
            f"{type(self).__qualname__} is immutable; use msg._replace({name}=...) "
            f"to make a changed copy"
        )

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__qualname__} is immutable")

    def _asdict(self) -> dict[str, Any]:
        """The field values by name, in declaration order."""
        return dict(zip(self.__field_names__, self, strict=True))

    def _replace(self: Any, **changes: Any) -> Any:
        """A copy with some fields changed (validated like a new message)."""
        unknown = set(changes) - set(self.__field_names__)
        if unknown:
            raise ValidationError(
                f"{type(self).__qualname__}._replace(): no field(s) {sorted(unknown)}; "
                f"fields are {list(self.__field_names__)}"
            )
        values = self._asdict()
        values.update(changes)
        return type(self)(**values)

    @classmethod
    def _ab_codec(cls) -> Any:
        """The generated codec of this class (built on first use)."""
        compiled = cls.__dict__.get("_ab_compiled")
        if compiled is None:
            compiled = _ClassCodec(cls)
            type.__setattr__(cls, "_ab_compiled", compiled)
        return compiled


class Field(_Record, metaclass=_MessageMeta):
    """Base class of nested, immutable field structs (eBus ``EField``).

    Declare fields with annotations; a subclass instance may be given where the
    base is declared, and it travels with its own type name."""

    __slots__ = ()


class Message(_Record, metaclass=_MessageMeta):
    """Base of the three message families.  Every message has ``subject`` and
    ``timestamp`` (epoch milliseconds; set at creation unless given)."""

    __slots__ = ()
    __family__: ClassVar[str] = "message"
    __replies__: ClassVar[frozenset[type[Reply]]] = frozenset()
    subject: str
    timestamp: int

    if TYPE_CHECKING:

        def __init__(self, subject: str, timestamp: int | None = None, **fields: Any) -> None: ...


class Notification(Message):
    """A message published to every in-scope subscriber of its key."""

    __slots__ = ()
    __family__: ClassVar[str] = "notification"


class Reply(Message):
    """A message sent back to one requestor.  ``status`` says whether more replies
    follow from the same replier; ``reason`` explains an ERROR."""

    __slots__ = ()
    __family__: ClassVar[str] = "reply"
    status: ReplyStatus = ReplyStatus.OK_FINAL
    reason: str | None = None


class Request(Message):
    """A message sent to the in-scope repliers of its key.

    Declare which reply classes may answer with ``class Q(Request, replies=(A, B))``;
    the base :class:`Reply` is always allowed."""

    __slots__ = ()
    __family__: ClassVar[str] = "request"
    __replies__: ClassVar[frozenset[type[Reply]]] = frozenset({Reply})

    @classmethod
    def allows_reply(cls, reply_class: type) -> bool:
        """True when ``reply_class`` may answer this request class."""
        return reply_class in cls.__replies__


# --------------------------------------------------------------------------- codec


class _ClassCodec:
    """Generated wire conversion for one class (see :mod:`actorbus.bus.codec`).

    ``to_wire(msg)`` returns a msgpack-native tuple; ``from_wire(obj)`` validates an
    untrusted unpacked object and builds the message, raising CodecError."""

    __slots__ = ("cls", "from_wire", "to_wire")

    def __init__(self, cls: type[_Record]) -> None:
        self.cls = cls
        self.to_wire, self.from_wire = _generate_codec(cls)


def _generate_codec(cls: type[_Record]) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    fields = cls.__fields__
    n = len(fields)
    has_optional = any(f.type.optional for f in fields)
    env: dict[str, Any] = {
        "_new": tuple.__new__,
        "cls": cls,
        "_Big": _BigInt,
        "_tuple": tuple,
        "_err": _decode_error,
        "_slow": None,
    }
    names = [f"v{f.index}" for f in fields]
    unpack = ", ".join(names) + ("," if n == 1 else "")

    # ---------------------------------------------------------------- encoder
    enc: list[str] = []
    needs_conversion = False
    for f, v in zip(fields, names, strict=True):
        base = f.type.inner if f.type.optional else f.type  # type: ignore[attr-defined]
        if isinstance(base, _Int):
            stmt = f"if not -9223372036854775808 <= {v} <= 18446744073709551615: {v} = _Big({v})"
        elif base.native:
            continue
        else:
            env[f"e{f.index}"] = base.to_wire
            stmt = f"{v} = e{f.index}({v})"
        needs_conversion = True
        enc.append(f"    if {v} is not None: {stmt}" if f.type.optional else f"    {stmt}")
    if has_optional:
        env["_opt"] = tuple((f.index, 1 << f.index) for f in fields if f.type.optional)
        enc_src = (
            "def to_wire(m):\n"
            f"    {unpack} = m\n" + "\n".join(enc) + "\n"
            "    mask = 0\n"
            f"    out = [0, {', '.join(names)}]\n"
            "    for i, bit in reversed(_opt):\n"
            "        if out[i + 1] is None:\n"
            "            mask |= bit\n"
            "            del out[i + 1]\n"
            "    out[0] = mask\n"
            "    return _tuple(out)\n"
        )
    elif needs_conversion:
        enc_src = (
            f"def to_wire(m):\n    {unpack} = m\n" + "\n".join(enc) + "\n"
            f"    return ({', '.join(names)}{',' if n == 1 else ''})\n"
        )
    else:
        enc_src = "def to_wire(m):\n    return m\n"

    # ---------------------------------------------------------------- decoder
    env["_fields"] = fields
    env["_slow"] = _slow_from_wire
    native_tests = []
    convert: list[str] = []
    for f, v in zip(fields, names, strict=True):
        ptype = f.type.python_type
        if f.type.native and ptype in _NATIVE_NAMES and not f.type.optional:
            env[f"t{f.index}"] = ptype
            native_tests.append(f"type({v}) is t{f.index}")
        else:
            env[f"d{f.index}"] = f.type.from_wire
            convert.append(f"        {v} = d{f.index}({v})")
    if issubclass(cls, Message):
        native_tests.append("0 <= v1 <= 9223372036854775807")
    if has_optional:
        dec_src = "def from_wire(o):\n    return _slow(cls, _fields, o)\n"
    else:
        test = " and ".join(native_tests) or "True"
        dec_src = (
            "def from_wire(o):\n"
            f"    if type(o) is not _tuple or len(o) != {n}:\n"
            "        return _slow(cls, _fields, o)\n"
            f"    {unpack} = o\n"
            f"    if not ({test}):\n"
            "        return _slow(cls, _fields, o)\n"
        )
        if convert:
            dec_src += (
                "    try:\n" + "\n".join(convert) + "\n"
                "    except _Mismatch:\n"
                "        return _slow(cls, _fields, o)\n"
                f"    return _new(cls, ({', '.join(names)}{',' if n == 1 else ''}))\n"
            )
        else:
            dec_src += "    return _new(cls, o)\n"
        env["_Mismatch"] = _Mismatch
    code = compile(enc_src + dec_src, f"<actorbus codec {cls.__qualname__}>", "exec")
    exec(code, env)
    return env["to_wire"], env["from_wire"]


def _decode_error(cls: type, detail: str) -> CodecError:
    return CodecError(f"cannot decode {cls.__qualname__} ({cls.__type_name__}): {detail}")  # type: ignore[attr-defined]


def _slow_from_wire(cls: type[_Record], fields: tuple[FieldSpec, ...], obj: object) -> Any:
    """Field-by-field decoding with precise errors (and the optional-field mask)."""
    if type(obj) is not tuple:
        raise _decode_error(cls, f"expected an array, found {type(obj).__name__}")
    values = list(obj)
    optional_bits = sum(1 << f.index for f in fields if f.type.optional)
    if optional_bits:
        if not values or type(values[0]) is not int:
            raise _decode_error(cls, "missing the presence mask of optional fields")
        mask = values.pop(0)
        if mask < 0 or mask & ~optional_bits:
            raise _decode_error(cls, f"presence mask {mask:#x} marks non-optional fields")
        present = len(fields) - bin(mask).count("1")
        if len(values) != present:
            raise _decode_error(cls, f"expected {present} values, found {len(values)}")
        it = iter(values)
        values = [None if mask & (1 << f.index) else next(it) for f in fields]
    elif len(values) != len(fields):
        raise _decode_error(cls, f"expected {len(fields)} values, found {len(values)}")
    out = []
    for f, raw in zip(fields, values, strict=True):
        try:
            if raw is None:
                if not f.type.optional:
                    raise _Mismatch(f.type.display, raw)
                out.append(None)
                continue
            value = f.type.from_wire(raw)
        except _Mismatch as exc:
            raise _decode_error(cls, f"field {f.name}: {exc.describe()}") from None
        if f.name == "timestamp" and f.index == 1 and not 0 <= value <= _TS_MAX:  # type: ignore[operator]
            raise _decode_error(cls, f"field timestamp: {value!r} out of range")
        out.append(value)
    return tuple.__new__(cls, out)
