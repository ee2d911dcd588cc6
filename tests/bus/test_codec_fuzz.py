"""Property tests: decoding untrusted bytes yields a message or CodecError, nothing else.

Seeded: ``ACTORBUS_SEED`` picks the seed (printed by every test), and
``ACTORBUS_FUZZ_EXAMPLES`` scales the number of examples for a longer run.
"""

from __future__ import annotations

import datetime as dt
import enum
import ipaddress
import math
import os
import uuid
from decimal import Decimal
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from actorbus import CodecError, Field, MessageKey, Notification, Reply, ReplyStatus
from actorbus.bus import Codec, SocketAddress, _codegen, decode, encode
from actorbus.bus import codec as codec_module

SEED = int(os.environ.get("ACTORBUS_SEED", "20261121"))
EXAMPLES = int(os.environ.get("ACTORBUS_FUZZ_EXAMPLES", "250"))

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(autouse=True)
def _print_seed() -> None:
    print(f"hypothesis seed: ACTORBUS_SEED={SEED}")


# --------------------------------------------------------------------------- classes


class Mood(enum.Enum):
    CALM = 1
    ANGRY = "angry"


class Bits(enum.IntFlag):
    A = 1
    B = 2


class Point(Field):
    x: int
    y: int


class Point3(Point):
    z: float | None = None


class Tagged(Point3):
    tag: str


class Simple(Notification):
    count: int
    ratio: float
    name: str
    flag: bool


class Optionals(Notification):
    a: int | None = None
    b: str | None = None
    c: bytes | None = None
    d: Point | None = None
    e: list[str] | None = None
    f: dt.datetime | None = None


class Nested(Notification):
    origin: Point
    path: list[Point]
    extra: Point3 | None = None


class Lists(Notification):
    ints: list[int]
    floats: tuple[float, ...]
    names: list[str]
    blobs: list[bytes]
    flags: list[bool]
    grid: list[list[int]]
    points: list[Point]


class Converted(Notification):
    dec: Decimal
    when: dt.datetime
    day: dt.date
    at: dt.time
    span: dt.timedelta
    mood: Mood
    bits: Bits
    ident: uuid.UUID
    v4: ipaddress.IPv4Address
    v6: ipaddress.IPv6Address
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address
    peer: SocketAddress
    key: MessageKey
    status: ReplyStatus
    maybe_day: dt.date | None = None
    maybe_key: MessageKey | None = None


CLASSES: list[type[Any]] = [Simple, Optionals, Nested, Lists, Converted, Reply]

# ------------------------------------------------------------------------ strategies

EXTREME_INTS = [0, -1, 2**63 - 1, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, 2**200, -(2**200)]
ints = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from(EXTREME_INTS),
    st.integers(-(2**300), 2**300),
)
floats = st.floats(allow_nan=True, allow_infinity=True)
texts = st.text(max_size=20)
timestamps = st.integers(0, 2**63 - 1)
offsets = st.timedeltas(
    min_value=-dt.timedelta(hours=23, minutes=59, seconds=59, microseconds=999999),
    max_value=dt.timedelta(hours=23, minutes=59, seconds=59, microseconds=999999),
)
zones = st.none() | st.builds(dt.timezone, offsets) | st.just(dt.UTC)
decimals = st.decimals(allow_nan=True, allow_infinity=True).filter(lambda d: not d.is_snan())
points: st.SearchStrategy[Point] = st.one_of(
    st.builds(Point, ints, ints),
    st.builds(Point3, ints, ints, st.none() | floats),
    st.builds(Tagged, ints, ints, st.none() | floats, texts),
)
keys = st.builds(MessageKey, st.sampled_from([Simple, Nested, Reply]), texts)
ipv6 = st.ip_addresses(v=6) | st.sampled_from(
    [ipaddress.IPv6Address("fe80::1%eth0"), ipaddress.IPv6Address("fe80::1%1")]
)


def _message(cls: type[Any], **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.builds(cls, subject=texts, timestamp=timestamps, **fields)


MESSAGES: dict[type[Any], st.SearchStrategy[Any]] = {
    Simple: _message(Simple, count=ints, ratio=floats, name=texts, flag=st.booleans()),
    Optionals: _message(
        Optionals,
        a=st.none() | ints,
        b=st.none() | texts,
        c=st.none() | st.binary(max_size=10),
        d=st.none() | points,
        e=st.none() | st.lists(texts, max_size=3),
        f=st.none() | st.datetimes(timezones=zones),
    ),
    Nested: _message(
        Nested,
        origin=points,
        path=st.lists(points, max_size=4),
        extra=st.none() | st.builds(Point3, ints, ints, st.none() | floats),
    ),
    Lists: _message(
        Lists,
        ints=st.lists(ints, max_size=5),
        floats=st.lists(floats, max_size=5),
        names=st.lists(texts, max_size=5),
        blobs=st.lists(st.binary(max_size=5), max_size=5),
        flags=st.lists(st.booleans(), max_size=5),
        grid=st.lists(st.lists(ints, max_size=3), max_size=3),
        points=st.lists(points, max_size=3),
    ),
    Converted: _message(
        Converted,
        dec=decimals,
        when=st.datetimes(timezones=zones),
        day=st.dates(),
        at=st.times(timezones=zones),
        span=st.timedeltas(),
        mood=st.sampled_from(Mood),
        bits=st.sampled_from([Bits.A, Bits.B, Bits.A | Bits.B, Bits(0)]),
        ident=st.uuids(),
        v4=st.ip_addresses(v=4),
        v6=ipv6,
        ip=st.ip_addresses() | ipv6,
        peer=st.builds(SocketAddress, texts, st.integers(0, 65535)),
        key=keys,
        status=st.sampled_from(ReplyStatus),
        maybe_day=st.none() | st.dates(),
        maybe_key=st.none() | keys,
    ),
    Reply: _message(Reply, status=st.sampled_from(ReplyStatus), reason=st.none() | texts),
}

any_message = st.sampled_from(CLASSES).flatmap(lambda cls: MESSAGES[cls])

# msgpack-native values a hostile peer could put anywhere in a wire form
wire_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | floats
    | texts
    | st.binary(max_size=20)
    | st.integers(-(2**100), 2**100)  # beyond 64 bits: packed by pack_default
    | st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=20))
    | st.builds(msgpack.Timestamp, st.integers(0, 2**34), st.integers(0, 999_999_999)),
    lambda inner: st.lists(inner, max_size=4).map(tuple),
    max_leaves=12,
)


# ------------------------------------------------------------------------- checks


def _decode_or_codec_error(cls: type[Any], data: bytes) -> Any:
    """The contract: a ``cls`` instance, or CodecError (anything else fails the test)."""
    try:
        msg = decode(cls, data)
    except CodecError:
        return None
    assert type(msg) is cls
    # what decodes is a valid message: it re-encodes, and that decodes to the same bytes
    again = encode(msg)
    assert encode(decode(cls, again)) == again
    return msg


def _same(a: Any, b: Any) -> bool:
    """Equality that treats NaN as equal to NaN (compare the wire bytes)."""
    return type(a) is type(b) and encode(a) == encode(b)


def _has_nan(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, Decimal):
        return value.is_nan()
    if isinstance(value, tuple):
        return any(_has_nan(v) for v in value)
    return False


# -------------------------------------------------------------------------- properties


@seed(SEED)
@FUZZ
@given(msg=any_message)
def test_every_generated_message_round_trips(msg: Any) -> None:
    data = encode(msg)
    back = decode(type(msg), data)
    assert encode(back) == data
    if not _has_nan(msg):
        assert back == msg  # datetime.fold is not carried; equality ignores it
    assert [type(v) for v in back] == [type(v) for v in msg]


@seed(SEED)
@FUZZ
@given(cls=st.sampled_from(CLASSES), data=st.binary(max_size=300))
def test_arbitrary_bytes_decode_or_raise_codec_error(cls: type[Any], data: bytes) -> None:
    _decode_or_codec_error(cls, data)


@seed(SEED)
@FUZZ
@given(
    msg=any_message,
    edits=st.lists(
        st.tuples(
            st.sampled_from(["flip", "set", "insert", "delete", "truncate"]),
            st.integers(0, 10_000),
            st.integers(0, 255),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_mutated_encodings_decode_or_raise_codec_error(
    msg: Any, edits: list[tuple[str, int, int]]
) -> None:
    data = bytearray(encode(msg))
    for kind, where, byte in edits:
        at = where % (len(data) + 1)
        if kind == "flip" and at < len(data):
            data[at] ^= 1 << (byte % 8)
        elif kind == "set" and at < len(data):
            data[at] = byte
        elif kind == "insert":
            data.insert(at, byte)
        elif kind == "delete" and at < len(data):
            del data[at]
        elif kind == "truncate":
            del data[at:]
    for cls in CLASSES:  # also as the wrong class
        _decode_or_codec_error(cls, bytes(data))


def _replace_somewhere(wire: Any, path: list[int], value: Any) -> Any:
    """``wire`` with the element at ``path`` (indexes, taken modulo) replaced."""
    if not path or not isinstance(wire, (tuple, list)) or not wire:
        return value
    items = list(wire)
    at = path[0] % len(items)
    items[at] = _replace_somewhere(items[at], path[1:], value)
    return tuple(items)


@seed(SEED)
@FUZZ
@given(
    msg=any_message,
    path=st.lists(st.integers(0, 50), min_size=1, max_size=4),
    value=wire_values,
)
def test_wire_forms_with_a_hostile_value_anywhere(msg: Any, path: list[int], value: Any) -> None:
    wire = codec_module.to_wire(msg)
    hostile = _replace_somewhere(wire, path, value)
    data = msgpack.packb(hostile, default=codec_module.pack_default)
    _decode_or_codec_error(type(msg), data)


@seed(SEED)
@FUZZ
@given(
    cls=st.sampled_from(CLASSES),
    msg=any_message,
    path=st.lists(st.integers(0, 50), max_size=4),
    value=wire_values,
)
def test_fast_decoder_agrees_with_the_reference_decoder(
    cls: type[Any], msg: Any, path: list[int], value: Any
) -> None:
    wire = codec_module.to_wire(msg)
    if path:
        wire = _replace_somewhere(wire, path, value)
    data = msgpack.packb(wire, default=codec_module.pack_default)
    obj = msgpack.unpackb(data, use_list=False, raw=False, ext_hook=codec_module.ext_hook)
    codec_module.compile(cls)
    fast: Any
    slow: Any
    try:
        fast = cls.__wire_decode__(obj)
    except CodecError as exc:
        fast = exc
    try:
        slow = _codegen._slow_from_wire(cls, obj)
    except CodecError as exc:
        slow = exc
    if isinstance(slow, CodecError):
        assert isinstance(fast, CodecError), (
            f"fast path accepted what the reference rejects: {slow}"
        )
    else:
        assert not isinstance(fast, CodecError), f"fast path rejected a valid form: {fast}"
        assert _same(fast, slow)


@seed(SEED)
@FUZZ
@given(msg=any_message, limit=st.integers(16, 400))
def test_size_limit_is_exact(msg: Any, limit: int) -> None:
    size = len(encode(msg))
    codec = Codec(max_size=limit)
    if size <= limit:
        assert _same(codec.decode(type(msg), codec.encode(msg)), msg)
    else:
        with pytest.raises(CodecError, match="over the limit"):
            codec.encode(msg)
        with pytest.raises(CodecError, match="over the limit"):
            codec.decode(type(msg), encode(msg))
