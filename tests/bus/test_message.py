"""Message declaration, construction and keys."""

from __future__ import annotations

import copy
import datetime as dt
import enum
import pickle
import time
from decimal import Decimal
from typing import ClassVar

import pytest

import actorbus.bus
from actorbus import Field, MessageKey, Notification, Reply, ReplyStatus, Request, UsageError
from actorbus.bus import Message, SocketAddress, lookup_type, registered_types
from actorbus.errors import DeclarationError, ValidationError

# --------------------------------------------------------------------- module-level


class Point(Field):
    x: int
    y: int


class Point3(Point):
    z: int = 0


class DataPoint(Notification):
    value: int
    source: str | None = None


class Quote(Notification, type_name="tests.Quote"):
    price: Decimal
    size: int
    venue: str | None = None
    when: dt.datetime | None = None


class Answer(Reply):
    text: str


class OtherAnswer(Reply):
    code: int


class Question(Request, replies=(Answer,)):
    text: str


class FollowUp(Question, replies=(OtherAnswer,)):
    depth: int = 1


class PointMsg(Notification):
    where: Point
    path: list[Point] = ()


# --------------------------------------------------------------------------- layout


def test_declaration_order_base_first_is_positional_order() -> None:
    assert DataPoint.__field_names__ == ("subject", "timestamp", "value", "source")
    assert FollowUp.__field_names__ == ("subject", "timestamp", "text", "depth")
    assert Reply.__field_names__ == ("subject", "timestamp", "status", "reason")
    assert Answer.__field_names__ == ("subject", "timestamp", "status", "reason", "text")
    assert Point3.__field_names__ == ("x", "y", "z")
    assert [f.position for f in Answer.__fields__] == [0, 1, 2, 3, 4]
    assert Answer.__fields__[4].owner == "Answer"
    assert DataPoint.__fields__[2].required
    assert not DataPoint.__fields__[3].required


def test_positional_and_keyword_construction_agree() -> None:
    a = DataPoint("/demo", 1000, 7, "sensor")
    b = DataPoint(subject="/demo", value=7, source="sensor", timestamp=1000)
    assert a == b
    assert (a.subject, a.timestamp, a.value, a.source) == ("/demo", 1000, 7, "sensor")
    assert tuple(a) == ("/demo", 1000, 7, "sensor")
    assert a._asdict() == {"subject": "/demo", "timestamp": 1000, "value": 7, "source": "sensor"}


def test_timestamp_is_set_at_creation_in_epoch_ms() -> None:
    before = time.time_ns() // 1_000_000
    msg = DataPoint("/demo", value=1)
    after = time.time_ns() // 1_000_000
    assert before <= msg.timestamp <= after
    assert DataPoint("/demo", 0, 1).timestamp == 0
    assert DataPoint("/demo", 2**63 - 1, 1).timestamp == 2**63 - 1


@pytest.mark.parametrize("bad", [-1, 2**63, True, 1.5, "1"])
def test_timestamp_out_of_range_or_wrong_type(bad: object) -> None:
    with pytest.raises(ValidationError) as err:
        DataPoint("/demo", bad, 1)
    text = str(err.value)
    assert "DataPoint.timestamp" in text
    assert "epoch milliseconds" in text
    assert type(bad).__name__ in text


def test_defaults_and_optionals() -> None:
    msg = DataPoint("/demo", value=3)
    assert msg.source is None
    assert Point3(1, 2).z == 0
    assert PointMsg("s", where=Point(1, 2)).path == ()
    reply = Reply("s")
    assert reply.status is ReplyStatus.OK_FINAL
    assert reply.reason is None


def test_immutable() -> None:
    msg = DataPoint("/demo", value=3)
    with pytest.raises(AttributeError, match="immutable"):
        msg.value = 4  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        msg.other = 4  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        del msg.value  # type: ignore[misc]
    assert not hasattr(msg, "__dict__")
    changed = msg._replace(value=4)
    assert (changed.value, msg.value) == (4, 3)
    with pytest.raises(ValidationError, match="no field"):
        msg._replace(nope=1)
    with pytest.raises(ValidationError, match="DataPoint.value"):
        msg._replace(value="x")


def test_equality_is_class_and_values_hash_follows() -> None:
    a = DataPoint("/d", 5, 1)
    assert a == DataPoint("/d", 5, 1)
    assert a != DataPoint("/d", 5, 2)
    assert hash(a) == hash(DataPoint("/d", 5, 1))

    class Twin(Notification):
        value: int
        source: str | None = None

    twin = Twin("/d", 5, 1)
    assert tuple(twin) == tuple(a)
    assert a != twin
    assert a != tuple(a)
    assert len({a, DataPoint("/d", 5, 1), twin}) == 2


def test_unhashable_only_when_a_field_is() -> None:
    # every supported value is hashable; a tuple of structs too
    msg = PointMsg("s", where=Point(1, 2), path=[Point(3, 4)])
    assert isinstance(hash(msg), int)


def test_repr_names_class_and_fields() -> None:
    msg = DataPoint("/d", 5, 1)
    assert repr(msg) == "DataPoint(subject='/d', timestamp=5, value=1, source=None)"
    assert repr(Point3(1, 2, 3)) == "Point3(x=1, y=2, z=3)"


def test_copy_pickle_and_match() -> None:
    msg = PointMsg("s", 9, where=Point3(1, 2, 3), path=[Point(1, 1)])
    assert copy.copy(msg) is msg
    assert copy.deepcopy(msg) is msg
    again = pickle.loads(pickle.dumps(msg))
    assert again == msg
    assert type(again.where) is Point3
    match DataPoint("/d", 5, 1):
        case DataPoint(subject, ts, value):
            assert (subject, ts, value) == ("/d", 5, 1)
        case _:
            pytest.fail("positional match failed")


def test_sequence_fields_hold_tuples() -> None:
    msg = PointMsg("s", where=Point(0, 0), path=[Point(1, 2), Point3(3, 4, 5)])
    assert msg.path == (Point(1, 2), Point3(3, 4, 5))
    assert type(msg.path) is tuple


def test_base_classes_are_not_instantiable() -> None:
    with pytest.raises(UsageError, match="base class"):
        Message("s")
    with pytest.raises(UsageError, match="base class"):
        Field()
    assert Notification("s").subject == "s"
    assert Reply("s", status=ReplyStatus.ERROR, reason="no").reason == "no"


# ------------------------------------------------------------------ value checking


def _error(cls: type, *args: object, **kwargs: object) -> str:
    with pytest.raises(ValidationError) as err:
        cls(*args, **kwargs)
    return str(err.value)


def test_wrong_type_names_class_field_expected_and_found() -> None:
    text = _error(DataPoint, "/d", value="7")
    assert text == "DataPoint.value: expected int, found str '7'"
    text = _error(DataPoint, "/d", value=1, source=5)
    assert text.startswith("DataPoint.source: expected str, found int 5")
    text = _error(DataPoint, 5, value=1)
    assert text.startswith("DataPoint.subject: expected str, found int")


def test_missing_required_field_is_named() -> None:
    text = _error(DataPoint, "/d")
    assert "DataPoint" in text
    assert "missing required field 'value'" in text
    text = _error(DataPoint)
    assert "missing required field 'subject'" in text


def test_bool_is_not_an_int_and_int_is_a_float() -> None:
    text = _error(DataPoint, "/d", value=True)
    assert "DataPoint.value: expected int, found bool True" in text

    class F(Notification):
        ratio: float
        flag: bool

    assert F("s", ratio=2, flag=False).ratio == 2.0
    assert type(F("s", ratio=2, flag=False).ratio) is float
    assert "F.flag: expected bool, found int 1" in _error(F, "s", ratio=1.0, flag=1)
    assert "F.ratio: expected float, found bool" in _error(F, "s", ratio=True, flag=True)
    assert "int too large for a float" in _error(F, "s", ratio=10**400, flag=True)


def test_subclasses_of_native_types_are_normalised() -> None:
    class Loud(str):
        def __str__(self) -> str:
            return "LOUD"

    class Count(enum.IntEnum):
        ONE = 1

    class Text(str, enum.Enum):  # noqa: UP042 - str() of it is "Text.A", not "a"
        A = "a"

    class Strs(Notification):
        text: str
        number: int
        raw: bytes

    msg = Strs(Loud("quiet"), text=Text.A, number=Count.ONE, raw=bytearray(b"ab"))
    assert type(msg.subject) is str and msg.subject == "quiet"
    assert type(msg.text) is str and msg.text == "a"
    assert type(msg.number) is int and msg.number == 1
    assert type(msg.raw) is bytes and msg.raw == b"ab"
    assert Strs("s", text="t", number=1, raw=memoryview(b"xy")).raw == b"xy"


def test_optional_fields_accept_none_required_do_not() -> None:
    assert DataPoint("/d", value=1, source=None).source is None
    text = _error(DataPoint, "/d", value=None)
    assert "DataPoint.value: expected int, found NoneType None" in text


def test_nested_struct_and_subclass_in_base_slot() -> None:
    msg = PointMsg("s", where=Point3(1, 2, 3))
    assert type(msg.where) is Point3
    text = _error(PointMsg, "s", where=(1, 2))
    assert "PointMsg.where: expected Point (or a subclass), found tuple" in text
    text = _error(PointMsg, "s", where=Point(1, 2), path=[Point(1, 2), "x"])
    assert "PointMsg.path" in text
    assert "item 1" in text
    assert "expected Point (or a subclass), found str" in text
    text = _error(Point, 1, "2")
    assert text == "Point.y: expected int, found str '2'"


def test_struct_field_values_are_checked_too() -> None:
    class Pair(Field):
        left: Decimal
        right: dt.date

    assert Pair(Decimal(1), dt.date(2020, 1, 1)).left == 1
    text = _error(Pair, 1.5, dt.date(2020, 1, 1))
    assert "Pair.left: expected Decimal, found float 1.5" in text
    text = _error(Pair, Decimal(1), dt.datetime(2020, 1, 1))
    assert "Pair.right: expected date" in text
    assert "pass value.date()" in text


def test_converted_type_checks() -> None:
    class Kinds(Notification):
        d: Decimal | None = None
        sock: SocketAddress | None = None
        key: MessageKey | None = None
        stamp: dt.datetime | None = None

    assert "signaling NaN" in _error(Kinds, "s", d=Decimal("sNaN"))
    assert Kinds("s", d=Decimal("NaN")).d.is_nan()
    assert Kinds("s", sock=("host", 80)).sock == SocketAddress("host", 80)
    assert type(Kinds("s", sock=("host", 80)).sock) is SocketAddress
    assert "port must be an int in 0..65535" in _error(Kinds, "s", sock=("h", 70000))
    assert "port must be an int in 0..65535" in _error(Kinds, "s", sock=("h", True))
    assert "host must be a str" in _error(Kinds, "s", sock=(1, 2))
    assert "Kinds.key: expected MessageKey" in _error(Kinds, "s", key=("x", "y"))
    assert "not a message class" in _error(Kinds, "s", key=MessageKey(int, "y"))  # type: ignore[arg-type]

    class BadZone(dt.tzinfo):
        def utcoffset(self, d: dt.datetime | None) -> dt.timedelta:
            return dt.timedelta(days=2)

    text = _error(Kinds, "s", stamp=dt.datetime(2020, 1, 1, tzinfo=BadZone()))
    assert "Kinds.stamp" in text
    assert "tzinfo fails" in text


def test_datetime_subclass_is_normalised() -> None:
    class MyTime(dt.datetime):
        pass

    class T(Notification):
        at: dt.datetime

    msg = T("s", at=MyTime(2020, 1, 2, 3, 4, 5, 6))
    assert type(msg.at) is dt.datetime
    assert msg.at == dt.datetime(2020, 1, 2, 3, 4, 5, 6)


def test_wrong_arity_and_unknown_keyword_are_type_errors() -> None:
    with pytest.raises(TypeError, match="DataPoint.__new__"):
        DataPoint("/d", 1, 2, "x", "extra")
    with pytest.raises(TypeError, match="nope"):
        DataPoint("/d", value=1, nope=2)


def test_field_named_like_a_builtin_works() -> None:
    class Odd(Notification):
        type: str
        len: int
        count: int

    msg = Odd("s", type="t", len=3, count=4)
    assert (msg.type, msg.len, msg.count) == ("t", 3, 4)
    assert "Odd.len: expected int" in _error(Odd, "s", type="t", len="3", count=4)


# ---------------------------------------------------------------- declaration errors


def _decl_error(make: object) -> str:
    with pytest.raises(DeclarationError) as err:
        make()  # type: ignore[operator]
    return str(err.value)


def test_unsupported_field_type() -> None:
    def make() -> None:
        class Bad(Notification):
            blob: object

    text = _decl_error(make)
    assert text.startswith("Bad.blob: unsupported field type")
    assert "allowed: bool, int, float, str, bytes, Decimal" in text

    def make_union() -> None:
        class Bad(Notification):
            either: int | str

    text = _decl_error(make_union)
    assert "Bad.either" in text
    assert "only X | None" in text

    def make_tuple() -> None:
        class Bad(Notification):
            pair: tuple[int, str]

    assert "Bad.pair" in _decl_error(make_tuple)
    assert "homogeneous" in _decl_error(make_tuple)

    def make_optional_items() -> None:
        class Bad(Notification):
            items: list[int | None]

    assert "Bad.items" in _decl_error(make_optional_items)

    def make_message_field() -> None:
        class Bad(Notification):
            inner: DataPoint

    assert "Bad.inner: unsupported field type" in _decl_error(make_message_field)

    def make_unhashable() -> None:
        class Bad(Notification):
            weird: [int]  # type: ignore[valid-type]

    assert "Bad.weird: unsupported field type" in _decl_error(make_unhashable)


def test_unresolvable_annotation() -> None:
    def make() -> None:
        class Bad(Notification):
            later: NotDefinedYet  # type: ignore[name-defined]  # noqa: F821

    text = _decl_error(make)
    assert "Bad.later: cannot resolve the annotation 'NotDefinedYet'" in text


def test_field_clashing_with_a_base_field() -> None:
    def make() -> None:
        class Bad(Notification):
            subject: str

    text = _decl_error(make)
    assert text.startswith("Bad.subject: clashes with the base field 'subject' of Message")

    def make_reply() -> None:
        class Bad(Reply):
            status: int

    assert "Bad.status: clashes with the base field 'status' of Reply" in _decl_error(make_reply)

    def make_sub() -> None:
        class Bad(Point):
            x: int

    assert "Bad.x: clashes with the base field 'x' of Point" in _decl_error(make_sub)

    def make_override() -> None:
        class Bad(Point):
            x = 5

    text = _decl_error(make_override)
    assert "Bad.x: assigns to the field 'x' of Point" in text


def test_field_clashing_with_a_method() -> None:
    def make() -> None:
        class Bad(Request):
            allows_reply: bool

    text = _decl_error(make)
    assert "Bad.allows_reply: clashes with the attribute 'allows_reply' of Request" in text


def test_underscore_field_and_bad_default() -> None:
    def make() -> None:
        class Bad(Notification):
            _hidden: int

    assert "Bad._hidden: field names may not start with '_'" in _decl_error(make)

    def make_default() -> None:
        class Bad(Notification):
            count: int = "many"  # type: ignore[assignment]

    text = _decl_error(make_default)
    assert "Bad.count: the default 'many' does not fit: expected int, found str" in text


def test_replies_must_name_reply_classes() -> None:
    def make() -> None:
        class Bad(Request, replies=(DataPoint,)):
            pass

    text = _decl_error(make)
    assert "Bad.replies" in text
    assert "DataPoint" in text
    assert "not a Reply subclass" in text
    assert "list only Reply subclasses" in text

    def make_not_iterable() -> None:
        class Bad(Request, replies=Answer):  # type: ignore[call-overload]
            pass

    assert "Bad.replies: replies= must be a tuple" in _decl_error(make_not_iterable)


def test_replies_only_on_requests() -> None:
    def make() -> None:
        class Bad(Notification, replies=(Answer,)):
            pass

    text = _decl_error(make)
    assert "Bad.replies: replies= is only allowed on Request subclasses" in text

    def make_reply() -> None:
        class Bad(Reply, replies=(Answer,)):
            pass

    assert "only allowed on Request subclasses" in _decl_error(make_reply)


def test_type_name_rules() -> None:
    def make() -> None:
        class Bad(Notification, type_name="has space"):
            pass

    assert "Bad: type_name='has space' is not allowed" in _decl_error(make)

    def make_colon() -> None:
        class Bad(Notification, type_name='a:"b'):
            pass

    assert "is not allowed" in _decl_error(make_colon)

    def make_clash() -> None:
        class Bad(Notification, type_name="tests.Quote"):
            pass

    text = _decl_error(make_clash)
    assert "type name 'tests.Quote' is already used by" in text
    assert "distinct type_name=" in text


def test_classvar_is_not_a_field() -> None:
    class WithConst(Notification):
        LIMIT: ClassVar[int] = 10
        value: int

    assert WithConst.__field_names__ == ("subject", "timestamp", "value")
    assert WithConst.LIMIT == 10


# ------------------------------------------------------------------- type names


def test_type_names_default_and_override() -> None:
    assert DataPoint.__type_name__ == f"{__name__}.DataPoint"
    assert Quote.__type_name__ == "tests.Quote"
    assert Notification.__type_name__ == "actorbus.Notification"
    assert Reply.__type_name__ == "actorbus.Reply"
    assert lookup_type("tests.Quote") is Quote
    assert lookup_type("no.such.Type") is None
    assert registered_types()[f"{__name__}.Point"] is Point


def test_redefining_a_class_in_the_same_place_replaces_it() -> None:
    def define() -> type:
        class Local(Notification):
            value: int

        return Local

    first, second = define(), define()
    assert first is not second
    assert lookup_type(second.__type_name__) is second


# --------------------------------------------------------------- request / reply


def test_request_reply_classes() -> None:
    assert Question.allows_reply(Reply)
    assert Question.allows_reply(Answer)
    assert not Question.allows_reply(OtherAnswer)
    assert FollowUp.allows_reply(Answer)  # inherited
    assert FollowUp.allows_reply(OtherAnswer)
    assert Request.allows_reply(Reply)
    assert not Request.allows_reply(Answer)
    assert ReplyStatus.OK_FINAL.is_final
    assert ReplyStatus.ERROR.is_final
    assert not ReplyStatus.OK_CONTINUING.is_final


def test_reply_status_and_reason() -> None:
    reply = Answer("q", status=ReplyStatus.OK_CONTINUING, text="part")
    assert reply.status is ReplyStatus.OK_CONTINUING
    assert reply.text == "part"
    text = _error(Answer, "q", status=1, text="x")
    assert "Answer.status: expected a member of ReplyStatus, found int 1" in text


# ------------------------------------------------------------------------ message key


def test_message_key_text_form() -> None:
    fishing = MessageKey(Quote, "FishingGear")
    assert str(fishing) == 'tests.Quote:"FishingGear"'
    assert repr(fishing) == 'MessageKey(tests.Quote:"FishingGear")'
    assert fishing != MessageKey(Quote, "CampingGear")
    assert fishing.type_name == "tests.Quote"
    msg = Quote("FishingGear", price=Decimal("1.5"), size=3)
    assert MessageKey.of(msg) == fishing


@pytest.mark.parametrize(
    "subject",
    [
        "",
        "plain",
        'with "quotes"',
        "back\\slash",
        "new\nline",
        "tab\t",
        "ünïcødé ✓ 日本",
        ":",
        "\x00",
    ],
)
def test_message_key_parse_round_trip(subject: str) -> None:
    key = MessageKey(Quote, subject)
    assert MessageKey.parse(str(key)) == key
    assert MessageKey.parse(f"  {key}  ") == key


class KeyProbeUnique(Notification):
    pass


def test_message_key_parse_by_short_name_and_registry() -> None:
    probe = MessageKey(KeyProbeUnique, "/demo")
    assert MessageKey.parse('KeyProbeUnique:"/demo"') == probe
    assert MessageKey.parse(f'{__name__}.KeyProbeUnique:"/demo"') == probe
    assert MessageKey.parse(f'{__name__}.DataPoint:"/demo"') == MessageKey(DataPoint, "/demo")
    only = {"x.Q": Quote}
    assert MessageKey.parse('x.Q:"a"', registry=only) == MessageKey(Quote, "a")
    assert MessageKey.parse('Quote:"a"', registry=only) == MessageKey(Quote, "a")


def test_message_key_parse_errors() -> None:
    with pytest.raises(UsageError, match='expected TypeName:"subject"'):
        MessageKey.parse("DataPoint:/demo")
    with pytest.raises(UsageError, match='expected TypeName:"subject"'):
        MessageKey.parse('"/demo"')
    with pytest.raises(UsageError, match="not one valid JSON string"):
        MessageKey.parse('DataPoint:"a"b"')
    with pytest.raises(UsageError, match="not one valid JSON string"):
        MessageKey.parse('DataPoint:"bad \\q escape"')
    with pytest.raises(UsageError, match="no message class named 'Nope' is registered"):
        MessageKey.parse('Nope:"x"')
    # a Field struct is not a message (this module's Point alone: another test
    # module may register a message class that is also named Point)
    with pytest.raises(UsageError, match="no message class named 'Point'"):
        MessageKey.parse('Point:"x"', registry={Point.__type_name__: Point})


def test_message_key_parse_ambiguous_short_name() -> None:
    class Clash(Notification, type_name="tests.one.Clash"):
        pass

    class Clash2(Notification, type_name="tests.two.Clash"):
        pass

    Clash2.__name__ = "Clash"
    with pytest.raises(UsageError, match="'Clash' is ambiguous") as err:
        MessageKey.parse('Clash:"x"')
    assert "tests.one.Clash" in str(err.value)
    assert "tests.two.Clash" in str(err.value)
    assert MessageKey.parse('tests.two.Clash:"x"').message_class is Clash2


# ---------------------------------------------------------------------------- exports


def test_bus_package_exports() -> None:
    for name in actorbus.bus.__all__:
        assert hasattr(actorbus.bus, name), name
    for name in ("Notification", "Request", "Reply", "ReplyStatus", "Field", "Message"):
        assert name in actorbus.bus.__all__
    for name in ("MessageKey", "SocketAddress", "Codec", "CodecError"):
        assert name in actorbus.bus.__all__
