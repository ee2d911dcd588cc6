"""The binary codec: round trips of every supported type, wire rules, limits."""

from __future__ import annotations

import datetime as dt
import enum
import ipaddress
import threading
import uuid
from decimal import Decimal
from typing import Any

import msgpack
import pytest

from actorbus import (
    CodecError,
    Field,
    MessageKey,
    Notification,
    Reply,
    ReplyStatus,
    Request,
    UsageError,
)
from actorbus.bus import Codec, SocketAddress, decode, encode
from actorbus.bus import codec as codec_module
from actorbus.errors import MessageTooLargeError, ValidationError

# --------------------------------------------------------------------------- classes


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2**40


class Perm(enum.Flag):
    R = 1
    W = 2
    X = 4


class Shape(enum.Enum):  # values msgpack cannot carry: travels by member name
    SQUARE = (1, 1)
    THIRD = 1 / 3


class Point(Field):
    x: int
    y: int


class Point3(Point):
    z: int | None = None


class Labelled(Point3):
    label: str


class Simple(Notification):
    count: int
    ratio: float
    name: str
    flag: bool


class Optionals(Notification):
    a: int | None = None
    b: str | None = None
    c: float | None = None
    d: bytes | None = None
    e: Decimal | None = None
    f: Point | None = None
    g: list[int] | None = None
    h: Color | None = None


class Nested(Notification):
    origin: Point
    path: list[Point]
    maybe: Point | None = None


class Every(Notification):
    b: bool
    i: int
    f: float
    s: str
    raw: bytes
    dec: Decimal
    when: dt.datetime
    day: dt.date
    at: dt.time
    span: dt.timedelta
    color: Color
    level: Level
    perm: Perm
    shape: Shape
    ident: uuid.UUID
    v4: ipaddress.IPv4Address
    v6: ipaddress.IPv6Address
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address
    peer: SocketAddress
    key: MessageKey
    point: Point
    ints: list[int]
    names: tuple[str, ...]
    floats: list[float]
    days: list[dt.date]
    nested: list[list[int]]


def every(**changes: Any) -> Every:
    values: dict[str, Any] = {
        "subject": "all",
        "timestamp": 1_700_000_000_000,
        "b": True,
        "i": -5,
        "f": 2.5,
        "s": "text",
        "raw": b"\x00\xff",
        "dec": Decimal("-12.3400"),
        "when": dt.datetime(2024, 2, 29, 12, 30, 15, 123456),
        "day": dt.date(2024, 2, 29),
        "at": dt.time(23, 59, 59, 999999),
        "span": dt.timedelta(days=3, seconds=7, microseconds=11),
        "color": Color.GREEN,
        "level": Level.HIGH,
        "perm": Perm.R | Perm.X,
        "shape": Shape.THIRD,
        "ident": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "v4": ipaddress.IPv4Address("192.0.2.1"),
        "v6": ipaddress.IPv6Address("2001:db8::1"),
        "ip": ipaddress.IPv4Address("10.0.0.1"),
        "peer": SocketAddress("example.org", 443),
        "key": MessageKey(Simple, "/demo"),
        "point": Point(1, 2),
        "ints": [1, 2, 3],
        "names": ("a", "b"),
        "floats": [1.0, 2],
        "days": [dt.date(1970, 1, 1)],
        "nested": [[1], [], [2, 3]],
    }
    values.update(changes)
    return Every(**values)


def round_trip(msg: Any, codec: Codec | None = None) -> Any:
    codec = codec or Codec()
    data = codec.encode(msg)
    back = codec.decode(type(msg), data)
    assert type(back) is type(msg)
    assert codec.encode(back) == data  # stable: what decodes re-encodes to the same bytes
    return back


# ----------------------------------------------------------------------- round trips


def test_simple_round_trip_is_a_plain_array() -> None:
    msg = Simple("/demo", 123, count=7, ratio=0.5, name="x", flag=False)
    assert round_trip(msg) == msg
    assert msgpack.unpackb(encode(msg)) == ["/demo", 123, 7, 0.5, "x", False]
    assert Simple.__wire_encode__ is None  # natives only: the message is its own wire form


def test_natives_with_their_exact_types_decode_to_the_class() -> None:
    wire = ("/demo", 123, 7, 0.5, "x", False)
    msg = codec_module.from_wire(Simple, wire)
    assert type(msg) is Simple and msg is not wire
    assert msg == Simple("/demo", 123, count=7, ratio=0.5, name="x", flag=False)
    assert msg.count == 7 and msg.flag is False


def test_every_type_round_trips() -> None:
    msg = every()
    back = round_trip(msg)
    assert back == msg
    for name in Every.__field_names__:
        assert type(getattr(back, name)) is type(getattr(msg, name)), name


EXTREMES: list[tuple[str, Any]] = [
    ("i", 2**63 - 1),
    ("i", -(2**63)),
    ("i", -(2**63) - 1),
    ("i", 2**64 - 1),
    ("i", 2**64),
    ("i", 2**200),
    ("i", -(2**200)),
    ("i", -(2**71)),
    ("i", 10**5000),  # beyond int's str() digit limit: travels as bytes
    ("ints", [0, 2**64, -(2**64), 2**63, -(2**63) - 1]),
    ("f", float("inf")),
    ("f", -0.0),
    ("f", 5e-324),
    ("dec", Decimal("1E+999999999999999999")),
    ("dec", Decimal("-1E-999999999999999999")),
    ("dec", Decimal("Infinity")),
    ("dec", Decimal("-Infinity")),
    ("dec", Decimal("-0")),
    ("dec", Decimal("0E-7")),
    ("dec", Decimal("9" * 5000 + ".5")),
    ("s", ""),
    ("s", "ünïcødé ✓ 日本 🚀"),
    ("subject", 'ünïcødé ✓ 日本 🚀 / "q"'),
    ("s", "\x00"),
    ("raw", b""),
    ("when", dt.datetime.min),
    ("when", dt.datetime.max),
    ("when", dt.datetime(2024, 1, 1, tzinfo=dt.UTC)),
    ("when", dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30)))),
    ("when", dt.datetime(2024, 1, 1, tzinfo=dt.timezone(-dt.timedelta(hours=12)))),
    ("when", dt.datetime.min.replace(tzinfo=dt.timezone(dt.timedelta(hours=14)))),
    ("when", dt.datetime.max.replace(tzinfo=dt.timezone(-dt.timedelta(hours=23)))),
    ("when", dt.datetime(1969, 12, 31, 23, 59, 59, 999999)),
    ("when", dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(microseconds=1)))),
    (
        "when",
        dt.datetime(2024, 1, 1, tzinfo=dt.timezone(-dt.timedelta(hours=23, microseconds=59))),
    ),
    ("day", dt.date.min),
    ("day", dt.date.max),
    ("at", dt.time(0, 0)),
    ("at", dt.time(12, 0, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30)))),
    ("at", dt.time(12, 0, tzinfo=dt.timezone(-dt.timedelta(hours=12)))),
    ("span", dt.timedelta(microseconds=-1)),
    ("span", -dt.timedelta(days=5, hours=3)),
    ("span", dt.timedelta.min),
    ("span", dt.timedelta.max),
    ("v6", ipaddress.IPv6Address("::")),
    ("v6", ipaddress.IPv6Address("fe80::1%eth0")),
    ("v6", ipaddress.IPv6Address("::ffff:192.0.2.1")),
    ("ip", ipaddress.IPv6Address("2001:db8::ff")),
    ("ip", ipaddress.IPv6Address("fe80::2%3")),
    ("peer", SocketAddress("", 0)),
    ("peer", SocketAddress("::1", 65535)),
    ("key", MessageKey(Every, 'ünï "quoted"')),
    ("perm", Perm.R | Perm.W | Perm.X),
    ("perm", Perm(0)),
    ("shape", Shape.SQUARE),
    ("level", Level.LOW),
    ("ints", []),
    ("nested", []),
]


@pytest.mark.parametrize(
    ("field", "value"), EXTREMES, ids=[f"{field}-{n}" for n, (field, _) in enumerate(EXTREMES)]
)
def test_extreme_values_round_trip(field: str, value: Any) -> None:
    msg = every(**{field: value})
    back = round_trip(msg)
    assert back == msg
    assert getattr(back, field) == getattr(msg, field)


def test_aware_datetimes_come_back_with_a_fixed_offset() -> None:
    from zoneinfo import ZoneInfo

    try:
        zone = ZoneInfo("Asia/Kolkata")
    except (KeyError, OSError):  # no tz database on this machine: use a tzinfo of our own
        zone = _FixedZone()  # type: ignore[assignment]
    when = dt.datetime(2024, 6, 1, 9, 15, tzinfo=zone)
    back = round_trip(every(when=when)).when
    assert back == when  # the same instant
    assert back.utcoffset() == dt.timedelta(hours=5, minutes=30)
    assert type(back.tzinfo) is dt.timezone  # the zone's name is not carried
    assert (back.hour, back.minute) == (9, 15)  # wall time preserved


class _FixedZone(dt.tzinfo):
    def utcoffset(self, d: dt.datetime | None) -> dt.timedelta:
        return dt.timedelta(hours=5, minutes=30)

    def dst(self, d: dt.datetime | None) -> dt.timedelta:
        return dt.timedelta(0)

    def tzname(self, d: dt.datetime | None) -> str:
        return "IST"


def test_naive_stays_naive() -> None:
    back = round_trip(every(when=dt.datetime(2000, 1, 1), at=dt.time(1, 2)))
    assert back.when.tzinfo is None
    assert back.at.tzinfo is None


def test_decimal_nan_round_trips_but_is_not_equal_to_itself() -> None:
    msg = every(dec=Decimal("NaN"))
    back = round_trip(msg)
    assert back.dec.is_qnan()
    assert back != msg  # Decimal('NaN') != Decimal('NaN'), as in Python
    assert encode(back) == encode(msg)
    assert round_trip(every(dec=Decimal("-NaN123"))).dec.as_tuple() == Decimal("-NaN123").as_tuple()


def test_float_nan_round_trips() -> None:
    back = round_trip(every(f=float("nan")))
    assert back.f != back.f


def test_nested_structs_and_subclasses_in_base_slots() -> None:
    msg = Nested(
        "s",
        origin=Labelled(1, 2, None, "origin"),
        path=[Point(1, 2), Point3(3, 4, 5), Labelled(5, 6, 7, "end"), Point3(8, 9)],
        maybe=Point3(0, 0, 0),
    )
    back = round_trip(msg)
    assert back == msg
    assert [type(p) for p in back.path] == [Point, Point3, Labelled, Point3]
    assert type(back.origin) is Labelled
    assert type(back.maybe) is Point3


def test_struct_encodes_on_its_own() -> None:
    point = Labelled(1, 2, 3, "x")
    assert decode(Labelled, encode(point)) == point
    assert msgpack.unpackb(encode(point)) == [1, 1, 2, 3, "x"]


def test_reply_status_and_request_round_trip() -> None:
    class Ask(Request):
        what: str

    reply = Reply("q", status=ReplyStatus.ERROR, reason="no replier")
    assert round_trip(reply) == reply
    assert round_trip(Reply("q")).status is ReplyStatus.OK_FINAL
    ask = Ask("q", what="x")  # one instance: two would carry different timestamps
    assert round_trip(ask) == ask


class Mode(enum.StrEnum):
    FAST = "fast"
    SAFE = "safe"


class Modes(Notification):
    level: Level
    mode: Mode
    color: Color


def test_enums_sent_by_value_pass_through_the_encoder_and_decode_to_members() -> None:
    """An IntEnum or StrEnum member is its own wire form (msgpack packs it as
    its value): the generated encoder hands it on untouched; a plain Enum is
    converted.  Decoding gives the very members back; the bytes are the values."""
    msg = Modes("s", level=Level.HIGH, mode=Mode.SAFE, color=Color.RED)
    wire = codec_module.to_wire(msg)
    assert wire[2] is Level.HIGH and wire[3] is Mode.SAFE
    assert wire[4] == "red" and type(wire[4]) is str
    data = Codec().encode(msg)
    assert msgpack.unpackb(data)[2:] == [2**40, "safe", "red"]
    back = Codec().decode(Modes, data)
    assert back.level is Level.HIGH and back.mode is Mode.SAFE and back.color is Color.RED
    with pytest.raises(ValidationError, match="Modes.level"):
        Modes("s", level=2**40, mode=Mode.SAFE, color=Color.RED)  # the value, not a member
    with pytest.raises(ValidationError, match="Modes.mode"):
        Modes("s", level=Level.LOW, mode="fast", color=Color.RED)


# ------------------------------------------------------------------ None costs nothing


@pytest.mark.parametrize("field", [f.name for f in Optionals.__fields__[2:]])
def test_none_costs_no_value_bytes(field: str) -> None:
    values = {
        "a": 1,
        "b": "x",
        "c": 1.5,
        "d": b"y",
        "e": Decimal(1),
        "f": Point(1, 2),
        "g": [1],
        "h": Color.RED,
    }
    full = Optionals("s", 1, **values)
    without = Optionals("s", 1, **{**values, field: None})
    full_wire, without_wire = codec_module.to_wire(full), codec_module.to_wire(without)
    value_size = len(msgpack.packb(full_wire[_wire_index(field)]))
    # the only other difference is the mask itself (0xff needs 2 bytes, 0x7f one)
    mask_change = len(msgpack.packb(full_wire[0])) - len(msgpack.packb(without_wire[0]))
    assert len(encode(without)) == len(encode(full)) - value_size - mask_change
    assert len(without_wire) == len(full_wire) - 1
    assert round_trip(without) == without


def _wire_index(field: str) -> int:
    return 1 + Optionals.__field_names__.index(field)  # mask first, all present


def test_all_none_is_just_the_mask_and_base_fields() -> None:
    msg = Optionals("s", 1)
    assert msgpack.unpackb(encode(msg)) == [0, "s", 1]
    assert round_trip(msg) == msg
    full = Optionals("s", 1, a=1, h=Color.RED)
    assert msgpack.unpackb(encode(full)) == [0b10000001, "s", 1, 1, "red"]


# ------------------------------------------------------------------- decoding rules


def _decode_wire(cls: type, wire: Any) -> Any:
    return decode(cls, msgpack.packb(wire))


def _wire_error(cls: type, wire: Any) -> str:
    with pytest.raises(CodecError) as err:
        _decode_wire(cls, wire)
    return str(err.value)


def test_bool_on_the_wire_for_an_int_is_rejected() -> None:
    text = _wire_error(Simple, ["s", 1, True, 0.5, "x", False])
    assert "cannot decode Simple" in text
    assert "field count: expected int, found bool True" in text
    text = _wire_error(Simple, ["s", 1, 1, 0.5, "x", 0])
    assert "field flag: expected bool, found int 0" in text
    text = _wire_error(Every, codec_module.to_wire(every())[:1] + (True,) + ())
    assert "cannot decode Every" in text


def test_int_on_the_wire_for_a_float_is_accepted() -> None:
    msg = _decode_wire(Simple, ["s", 1, 1, 2, "x", False])
    assert msg.ratio == 2.0
    assert type(msg.ratio) is float
    text = _wire_error(Simple, ["s", 1, 1, True, "x", False])
    assert "field ratio: expected float, found bool True" in text


def test_timestamp_range_on_the_wire() -> None:
    assert _decode_wire(Simple, ["s", 2**63 - 1, 1, 2.0, "x", False]).timestamp == 2**63 - 1
    for bad in (-1, 2**63, 2**64 - 1, 1.0, "1"):
        text = _wire_error(Simple, ["s", bad, 1, 2.0, "x", False])
        assert "field timestamp: expected int epoch milliseconds" in text


def test_wrong_shapes() -> None:
    assert "expected an array, found dict" in _wire_error(Simple, {"subject": "s"})
    assert "expected 6 field values, found 5" in _wire_error(Simple, ["s", 1, 1, 2.0, "x"])
    assert "expected an array, found int" in _wire_error(Simple, 5)
    assert "field subject: expected str, found bytes" in _wire_error(
        Simple, [b"s", 1, 1, 2.0, "x", False]
    )


def test_presence_mask_is_validated() -> None:
    assert _decode_wire(Optionals, [0, "s", 1]) == Optionals("s", 1)
    assert "presence mask first" in _wire_error(Optionals, [])
    assert "presence mask is a str" in _wire_error(Optionals, ["s", 1])
    assert "presence mask is a bool" in _wire_error(Optionals, [True, "s", 1])
    assert "bits beyond the 8 optional fields" in _wire_error(Optionals, [256, "s", 1])
    assert "bits beyond" in _wire_error(Optionals, [-1, "s", 1])
    assert "needs 4 items, found 3" in _wire_error(Optionals, [1, "s", 1])
    assert "needs 3 items, found 4" in _wire_error(Optionals, [0, "s", 1, 5])
    # a present value is never nil
    assert "field a: expected int, found NoneType" in _wire_error(Optionals, [1, "s", 1, None])


def test_big_ints_must_be_canonical() -> None:
    big = 2**100
    wire = codec_module.to_wire(every(i=big))
    assert (big.bit_length() + 8) // 8 == 13
    ok = msgpack.packb(wire, default=codec_module.pack_default)
    assert ok == encode(every(i=big))
    assert decode(Every, ok).i == big
    padded = msgpack.packb(wire, default=lambda v: v.to_bytes(20, "big", signed=True))
    with pytest.raises(CodecError, match="field i: expected int.*not minimal"):
        decode(Every, padded)
    small_as_bytes = msgpack.packb(["s", 1, (5).to_bytes(9, "big"), 2.0, "x", False])
    with pytest.raises(CodecError, match="64-bit integers must travel as msgpack ints"):
        decode(Simple, small_as_bytes)


def test_struct_wire_forms_are_checked() -> None:
    ok = ["s", 1, [1, 2], [[1, 2]]]
    assert _decode_wire(Nested, [0, *ok]).origin == Point(1, 2)
    text = _wire_error(Nested, [0, "s", 1, [1, "2"], []])
    assert "cannot decode Nested" in text
    assert "field origin: cannot decode Point" in text
    assert "field y: expected int, found str" in text
    assert "field origin" in _wire_error(Nested, [0, "s", 1, [1, 2, 3], []])
    assert "field origin" in _wire_error(Nested, [0, "s", 1, "point", []])


def _ext(type_name: str, fields: list[Any]) -> msgpack.ExtType:
    return msgpack.ExtType(1, msgpack.packb([type_name, fields]))


def test_subclass_ext_is_checked_against_the_declared_base() -> None:
    good = _ext(Point3.__type_name__, [0b1, 1, 2, 3])
    assert _decode_wire(Nested, [0, "s", 1, good, []]).origin == Point3(1, 2, 3)

    # a registered Field that is not a Point
    class Other(Field):
        x: int
        y: int

    text = _wire_error(Nested, [0, "s", 1, _ext(Other.__type_name__, [1, 2]), []])
    assert "field origin: expected a registered subclass of Point" in text
    text = _wire_error(Nested, [0, "s", 1, _ext(Simple.__type_name__, ["s", 1]), []])
    assert "subclass of Point" in text
    text = _wire_error(Nested, [0, "s", 1, _ext("no.such.Type", [1, 2]), []])
    assert "unknown or unrelated type" in text
    text = _wire_error(Nested, [0, "s", 1, msgpack.ExtType(9, b"\x90"), []])
    assert "unknown ext code 9" in text
    text = _wire_error(Nested, [0, "s", 1, msgpack.ExtType(1, b"\xc1"), []])
    assert "malformed" in text
    text = _wire_error(Nested, [0, "s", 1, msgpack.ExtType(1, msgpack.packb([1, 2])), []])
    assert "[type name, fields]" in text
    # an ext where no struct is declared
    assert "field count" in _wire_error(Simple, ["s", 1, good, 2.0, "x", False])
    # inside a list as well
    text = _wire_error(Nested, [0, "s", 1, [1, 2], [[1, 2], _ext(Other.__type_name__, [1, 2])]])
    assert "field path" in text
    assert "item 1" in text


def test_unknown_message_key_type_is_rejected() -> None:
    wire = list(codec_module.to_wire(every()))
    index = Every.__field_names__.index("key")
    wire[index] = ["no.such.Type", "x"]
    assert "field key" in _wire_error(Every, wire)
    wire[index] = [Point.__type_name__, "x"]  # a Field, not a message class
    assert "field key" in _wire_error(Every, wire)


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("dec", " 1"),
        ("dec", "1_000"),
        ("dec", "sNaN"),
        ("dec", "1e1000000000000000000"),
        ("dec", "١"),
        ("when", [0]),
        ("when", [0, 86400]),
        ("when", [0, float("nan")]),
        ("when", [2**63, None]),
        ("when", [0, "+05:30"]),
        ("day", 10**9),
        ("day", True),
        ("at", [86_400_000_000, None]),
        ("at", [-1, None]),
        ("span", [0, 86400, 0]),
        ("span", [0, 0, 1_000_000]),
        ("span", [10**9, 0, 0]),
        ("ident", b"short"),
        ("v4", b"\x01\x02\x03"),
        ("v6", b"\x00" * 4),
        ("v6", "::1"),
        ("v6", "not an address%x"),
        ("ip", b"\x00" * 5),
        ("peer", ["h", 70000]),
        ("peer", ["h", True]),
        ("peer", ["h"]),
        ("color", "blue"),
        ("color", 1),
        ("level", 3),
        ("level", True),
        ("level", "1"),
        ("level", 1.0),
        ("level", [1]),  # unhashable: the inline lookup must not be tried
        ("color", ["red"]),
        ("color", None),
        ("perm", 8),
        ("shape", "CIRCLE"),
        ("shape", 1),
        ("ints", [1, "2"]),
        ("names", "ab"),
        ("floats", [1.0, True]),
        ("nested", [[1], 2]),
    ],
)
def test_bad_converted_wire_values(field: str, bad: Any) -> None:
    wire = list(codec_module.to_wire(every()))
    wire[Every.__field_names__.index(field)] = bad
    assert f"field {field}:" in _wire_error(Every, wire)


def test_str_and_bytes_are_distinct_and_utf8_is_checked() -> None:
    with pytest.raises(CodecError, match="malformed Simple body"):
        decode(Simple, b"\x96\xa1\xff\x01\x01\xcb" + b"\x00" * 8 + b"\xa1x\xc2")
    data = msgpack.packb(["s", 1, 1, 2.0, "x", False], use_bin_type=False)
    assert decode(Simple, data).name == "x"  # old-style raw is str


def test_lone_surrogates_cannot_be_encoded() -> None:
    msg = Simple("\ud800", count=1, ratio=1.0, name="x", flag=True)
    with pytest.raises(CodecError, match="cannot encode Simple") as err:
        encode(msg)
    assert isinstance(err.value.__cause__, UnicodeEncodeError)


# ------------------------------------------------------------------------ size limit


def test_max_size_on_encode_and_decode() -> None:
    small = Codec(max_size=64)
    msg = Simple("/x", count=1, ratio=1.0, name="y" * 100, flag=True)
    with pytest.raises(MessageTooLargeError) as err:
        small.encode(msg)
    text = str(err.value)
    assert "Simple on subject '/x' encodes to" in text
    assert "over the limit of 64" in text
    data = Codec().encode(msg)
    with pytest.raises(MessageTooLargeError, match=r"body for Simple is over the limit of 64"):
        small.decode(Simple, data)
    with pytest.raises(MessageTooLargeError):
        small.decode(Simple, memoryview(data))
    assert small.decode(Simple, small.encode(msg._replace(name="y"))).name == "y"
    assert isinstance(MessageTooLargeError("x"), CodecError)


def test_default_limit_is_one_mebibyte() -> None:
    assert Codec().max_size == 1 << 20
    near = Simple("s", count=1, ratio=1.0, name="x" * ((1 << 20) - 100), flag=True)
    assert len(encode(near)) <= 1 << 20
    over = near._replace(name="x" * (1 << 20))
    with pytest.raises(MessageTooLargeError):
        encode(over)


def test_codec_arguments() -> None:
    for bad in (0, 15, "big", 2.0):
        with pytest.raises(UsageError, match="expected an int number of bytes >= 16"):
            Codec(max_size=bad)  # type: ignore[arg-type]
    assert repr(Codec(100)) == "Codec(max_size=100)"


def test_bytearray_and_memoryview_input() -> None:
    msg = Simple("s", count=1, ratio=1.0, name="x", flag=True)
    data = encode(msg)
    assert decode(Simple, bytearray(data)) == msg
    assert decode(Simple, memoryview(data)) == msg


# --------------------------------------------------------------- hostile structure


def test_huge_declared_lengths_do_not_allocate() -> None:
    for header in (b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff", b"\xdb\xff\xff\xff\xff"):
        with pytest.raises(CodecError):
            decode(Simple, header + b"\x00" * 16)


def test_deep_array_nesting_is_a_codec_error() -> None:
    with pytest.raises(CodecError):
        decode(Simple, b"\x91" * 100_000 + b"\x00")


class Node(Field):
    pass


class Tree(Node):
    label: int
    kids: list[Node]


class Forest(Notification):
    root: Node


def test_deep_sub_struct_nesting_is_bounded() -> None:
    tree: Node = Node()
    for depth in range(20):
        tree = Tree(depth, [tree])
    msg = Forest("s", root=tree)
    assert round_trip(msg) == msg
    for _ in range(40):
        tree = Tree(0, [tree])
    with pytest.raises(CodecError, match="nested more than 32 sub-struct levels"):
        encode(Forest("s", root=tree))
    # hand-built bytes nested far deeper than the encoder allows
    payload = msgpack.packb([Node.__type_name__, []])
    for _ in range(2000):
        inner = msgpack.ExtType(1, payload)
        payload = msgpack.packb([Tree.__type_name__, [0, [inner]]])
    data = msgpack.packb(["s", 1, msgpack.ExtType(1, payload)])
    with pytest.raises(CodecError, match="nested over 32 levels deep"):
        decode(Forest, data)


def test_msgpack_timestamp_ext_is_not_a_value() -> None:
    stamp = msgpack.Timestamp(1, 0)
    text = _wire_error(Simple, ["s", 1, stamp, 1.0, "x", True])
    assert "field count" in text


def test_fixed_offset_decoding_accepts_only_what_the_encoder_can_write() -> None:
    wire = list(codec_module.to_wire(every()))
    index = Every.__field_names__.index("when")
    wire[index] = [0, 19800]
    assert _decode_wire(Every, wire).when.utcoffset() == dt.timedelta(hours=5, minutes=30)
    wire[index] = [0, -0.5]
    assert _decode_wire(Every, wire).when.utcoffset() == dt.timedelta(seconds=-0.5)
    wire[index] = [0, 86400.0]
    assert "field when" in _wire_error(Every, wire)


# ----------------------------------------------------------------- compile and API


def test_compile_generates_once_and_rejects_bases() -> None:
    class Fresh(Notification):
        value: Decimal

    stub = Fresh.__dict__["__wire_encode__"]
    codec_module.compile(Fresh)
    compiled = Fresh.__dict__["__wire_encode__"]
    assert compiled is not stub
    codec_module.compile(Fresh)
    assert Fresh.__dict__["__wire_encode__"] is compiled
    for bad in (Notification.__mro__[1], Field, int):
        with pytest.raises(UsageError):
            codec_module.compile(bad)


def test_subclass_does_not_use_its_parents_codec() -> None:
    class Parent(Notification):
        a: int

    class Child(Parent):
        b: str | None = None

    codec_module.compile(Parent)
    msg = Child("s", 1, a=1, b="x")
    assert round_trip(msg) == msg
    assert round_trip(Parent("s", 1, a=2)) == Parent("s", 1, a=2)


def test_to_wire_and_from_wire() -> None:
    msg = every()
    wire = codec_module.to_wire(msg)
    frame = msgpack.packb({"body": wire}, default=codec_module.pack_default)
    unpacked = msgpack.unpackb(frame, use_list=False, ext_hook=codec_module.ext_hook)
    assert codec_module.from_wire(Every, unpacked["body"]) == msg
    nested = every(point=Point3(1, 2, 3), i=2**70)
    frame = msgpack.packb([codec_module.to_wire(nested)], default=codec_module.pack_default)
    unpacked = msgpack.unpackb(frame, use_list=False, ext_hook=codec_module.ext_hook)
    assert codec_module.from_wire(Every, unpacked[0]) == nested
    with pytest.raises(CodecError, match="cannot decode Every"):
        codec_module.from_wire(Every, ())


def test_encoding_from_many_threads() -> None:
    messages = [every(i=n, s=str(n) * n, ints=list(range(n))) for n in range(50)]
    expected = [encode(m) for m in messages]
    results: list[list[bytes]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def work() -> None:
        try:
            start.wait(timeout=10)
            results.append([encode(m) for m in messages for _ in range(20)][::20])
        except BaseException as exc:  # report in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    assert results == [expected] * 4
