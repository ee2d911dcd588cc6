"""The generated per-class JSON converters (net/jrep/_compiled.py) agree with the
generic rules (net/jrep/_values.py) on every input: the same Value object for
any message, and for any Value the same message or the same error; and they
take their fast path for the common forms (the generic conversion is not
called), deferring to it otherwise."""

from __future__ import annotations

import datetime as dt
import enum
import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actorbus import Field, Notification
from actorbus.bus.message import Message
from actorbus.net.jrep._compiled import decoder_source, encoder_source, make_decoder
from actorbus.net.jrep._parts import JrepFault
from actorbus.net.jrep._values import (
    _field_from_json,
    _message_from_json,
    _message_to_json,
    message_from_json,
    message_to_json,
)


class Hue(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Perm(enum.Flag):
    R = 1
    W = 2


class Spot(Field, type_name="jrepcompiled.Spot"):
    x: int
    y: float


class Plain(Notification, type_name="jrepcompiled.Plain"):
    i: int
    s: str
    b: bool
    f: float
    raw: bytes


class Mixed(Notification, type_name="jrepcompiled.Mixed"):
    price: Decimal
    when: dt.datetime
    hue: Hue
    spot: Spot
    tags: tuple[str, ...]
    n: int | None = None
    blob: bytes | None = None
    label: str = "none"
    on: bool = False
    shade: Hue | None = None
    perm: Perm = Perm.R


class Empty(Notification, type_name="jrepcompiled.Empty"):
    pass


CLASSES: list[type[Message]] = [Plain, Mixed, Empty]

ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
floats = st.floats(allow_nan=True, allow_infinity=True)
texts = st.text(max_size=12)
timestamps = st.integers(min_value=0, max_value=2**63 - 1)
plains = st.builds(
    Plain, texts, timestamps, i=ints, s=texts, b=st.booleans(), f=floats, raw=st.binary(max_size=40)
)
mixeds = st.builds(
    Mixed,
    texts,
    timestamps,
    price=st.decimals(allow_nan=False, allow_infinity=False, places=4),
    when=st.datetimes(),
    hue=st.sampled_from(Hue),
    spot=st.builds(Spot, ints, st.floats(allow_nan=False)),
    tags=st.lists(texts, max_size=3).map(tuple),
    n=st.none() | ints,
    blob=st.none() | st.binary(max_size=10),
    label=texts,
    on=st.booleans(),
    shade=st.none() | st.sampled_from(Hue),
    perm=st.sampled_from([Perm.R, Perm.W, Perm.R | Perm.W, Perm(0)]),
)
messages = plains | mixeds | st.builds(Empty, texts, timestamps)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["cHA=", "cHA", "NaN", "2024-02-29T12:00:00", "1.5", "red", "RED", "**"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


def _outcome(convert: Any, cls: type[Message], value: object) -> tuple[str, Any]:
    try:
        message = convert(cls, "/s", value)
    except JrepFault as fault:
        return ("error", (fault.code, str(fault)))
    given_time = isinstance(value, dict) and "timestamp" in value
    # (an absent timestamp is "now": two conversions read the clock apart)
    return ("message", tuple(message) if given_time else (message[0], *message[2:]))


def _compiled(cls: type[Message], subject: str, value: object) -> Message:
    return message_from_json(cls, subject, value)


@settings(max_examples=300, deadline=None)
@given(messages)
def test_the_encoder_gives_the_generic_value_and_decodes_back(message: Message) -> None:
    value = message_to_json(message)
    assert json.dumps(value, sort_keys=True) == json.dumps(
        _message_to_json(message), sort_keys=True
    )
    wire = json.loads(json.dumps(value))
    back = message_from_json(type(message), message.subject, wire)
    assert back == _message_from_json(type(message), message.subject, wire)
    if not (isinstance(message, Plain) and message.f != message.f):  # NaN != NaN
        assert back == message


@st.composite
def values_for(draw: st.DrawFn) -> tuple[type[Message], object]:
    """A class and a Value: sometimes not an object; else some of the class's
    fields (valid or any JSON) and sometimes an unknown key."""
    cls = draw(st.sampled_from(CLASSES))
    if draw(st.integers(0, 9)) == 0:
        return cls, draw(json_values)
    good = json.loads(json.dumps(message_to_json(draw(messages.filter(lambda m: type(m) is cls)))))
    value: dict[str, Any] = {}
    for name, item in good.items():
        choice = draw(st.integers(0, 5))
        if choice == 0:
            continue  # missing
        value[name] = draw(json_values) if choice == 1 else item
    if draw(st.integers(0, 5)) == 0:
        value[draw(st.sampled_from(["subject", "extra", "@type"]))] = draw(json_values)
    return cls, value


@settings(max_examples=600, deadline=None)
@given(values_for())
def test_the_decoder_agrees_with_the_generic_rules_on_any_value(
    case: tuple[type[Message], object],
) -> None:
    cls, value = case
    assert _outcome(_compiled, cls, value) == _outcome(_message_from_json, cls, value)


@pytest.mark.parametrize(
    ("cls", "value"),
    [
        (Plain, {"timestamp": 5, "i": 1, "s": "x", "b": True, "f": 0.5, "raw": "cHA="}),
        (Plain, {"i": -(2**63), "s": "", "b": False, "f": -1e300, "raw": ""}),
        (
            Mixed,
            {
                "price": "1.25",
                "when": "2024-02-29T12:00:00",
                "hue": "RED",
                "spot": {"x": 1, "y": 2.5},
                "tags": ["a"],
                "n": None,
                "blob": "cHA=",
                "shade": "BLUE",
            },
        ),
        (Empty, {}),
        (Empty, {"timestamp": 7}),
    ],
)
def test_the_common_forms_take_the_fast_path(cls: type[Message], value: dict[str, Any]) -> None:
    slow_calls: list[object] = []

    def slow(c: type[Message], subject: str, v: object) -> Message:
        slow_calls.append(v)
        return _message_from_json(c, subject, v)

    decode = make_decoder(cls, slow, _field_from_json)
    message = decode("/s", value)
    assert slow_calls == []
    assert tuple(message)[2:] == tuple(_message_from_json(cls, "/s", value))[2:]


@pytest.mark.parametrize(
    ("cls", "value", "why"),
    [
        (Plain, {"i": 1, "s": "x", "b": True, "f": 1, "raw": "cHA="}, "an int for a float"),
        (Plain, {"i": True, "s": "x", "b": True, "f": 0.5, "raw": "cHA="}, "a bool for an int"),
        (Plain, {"i": 1, "s": "x", "b": True, "f": 0.5, "raw": "cHA"}, "bad base64"),
        (Plain, {"i": 1, "s": "x", "b": True, "f": 0.5}, "a missing field"),
        (Plain, {"i": 1, "s": "x", "b": True, "f": 0.5, "raw": "", "z": 1}, "an unknown key"),
        (Plain, {"timestamp": None, "i": 1, "s": "x", "b": 1, "f": 0.5, "raw": ""}, "null time"),
        (Plain, {"timestamp": -1, "i": 1, "s": "x", "b": True, "f": 0.5, "raw": ""}, "bad time"),
        (Plain, None, "no Value"),
        (Plain, [1], "not an object"),
    ],
)
def test_anything_else_goes_the_generic_way(cls: type[Message], value: object, why: str) -> None:
    slow_calls: list[object] = []

    def slow(c: type[Message], subject: str, v: object) -> Message:
        slow_calls.append(v)
        return _message_from_json(c, subject, v)

    decode = make_decoder(cls, slow, _field_from_json)
    try:
        decode("/s", value)
    except JrepFault:
        pass
    assert slow_calls == [value], why


def test_the_generated_sources_name_every_field() -> None:
    for cls in CLASSES:
        decoder, encoder = decoder_source(cls), encoder_source(cls)
        for spec in cls.__fields__[1:]:
            assert repr(spec.name) in decoder and repr(spec.name) in encoder
