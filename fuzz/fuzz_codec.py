"""Fuzz target for the message codec: untrusted bytes become a message or a
:class:`~actorbus.errors.CodecError` — nothing else — on every path a body takes.

A body reaches a decoder two ways, and both are fuzzed with the same bytes:

* **standalone** — ``Codec.decode(cls, data)`` (a journal record, a stored body);
* **inside a frame** — the link protocol unpacks a whole frame with msgpack and
  hands the body, already unpacked, to ``codec.from_wire(cls, obj)``.  Here the
  bytes are unpacked by a streaming ``msgpack.Unpacker`` fed in pieces cut at
  points the input chooses, the way a socket delivers them.

Contract checked on every input:

1. ``decode`` returns an instance of the class or raises CodecError;
2. a decoded message re-encodes, and its encoding decodes to a message with
   the same encoding (decode ∘ encode is stable);
3. the streaming path agrees with ``decode``: fed whole or in pieces, with the
   codec's ``ext_hook``, it yields the same message, or both refuse the bytes;
4. ``from_wire`` on the body as msgpack unpacks it with no ``ext_hook`` (what a
   link hands over) returns a message or raises CodecError.

Input layout: byte 0 picks the class (:data:`CLASSES`), byte 1 seeds how the
rest is cut, the rest is the body.

With atheris installed::

    .venv/bin/python fuzz/fuzz_codec.py -max_total_time=600 corpus/codec/

Without it, :func:`one_input` is the whole target (tests/reliability drives it
with hypothesis); :func:`seeds` gives valid bodies to start a corpus from.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import ipaddress
import itertools
import random
import sys
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fuzzing import fuzz, instrumented

# Coverage instrumentation only when run as the fuzzer, not when a test imports us.
with instrumented(__name__):
    import msgpack

    from actorbus.bus import (
        Codec,
        CodecError,
        Field,
        MessageKey,
        Notification,
        Reply,
        Request,
        SocketAddress,
    )
    from actorbus.bus import codec as codec_module

__all__ = ["CLASSES", "MAX_SIZE", "one_input", "seeds", "split"]

#: Small, so the size limit is reached too.
MAX_SIZE = 4096
_CODEC = Codec(max_size=MAX_SIZE)
_BIG = Codec()  # re-encoding may legitimately grow a non-canonical input


class Hue(enum.Enum):
    RED = "red"
    BLUE = 2


class Perm(enum.IntFlag):
    R = 1
    W = 2


class Spot(Field, type_name="fuzz.codec.Spot"):
    x: int
    y: int


class Spot3(Spot, type_name="fuzz.codec.Spot3"):
    z: float | None = None


class Label(Spot3, type_name="fuzz.codec.Label"):
    text: str


class Plain(Notification, type_name="fuzz.codec.Plain"):
    count: int
    ratio: float
    name: str
    flag: bool
    raw: bytes


class Sparse(Notification, type_name="fuzz.codec.Sparse"):
    a: int | None = None
    b: str | None = None
    c: Spot | None = None
    d: list[int] | None = None
    e: dt.datetime | None = None
    f: Hue | None = None


class Deep(Notification, type_name="fuzz.codec.Deep"):
    origin: Spot
    path: list[Spot]
    grid: list[list[int]]
    names: tuple[str, ...]
    extra: Spot3 | None = None


class Rich(Notification, type_name="fuzz.codec.Rich"):
    dec: Decimal
    when: dt.datetime
    day: dt.date
    at: dt.time
    span: dt.timedelta
    hue: Hue
    perm: Perm
    ident: uuid.UUID
    v4: ipaddress.IPv4Address
    v6: ipaddress.IPv6Address
    peer: SocketAddress
    key: MessageKey


class Ask(Request, type_name="fuzz.codec.Ask"):
    query: str
    limit: int | None = None


class Answer(Reply, type_name="fuzz.codec.Answer"):
    rows: list[Spot]


#: The classes byte 0 chooses from.
CLASSES: tuple[type[Any], ...] = (Plain, Sparse, Deep, Rich, Ask, Answer, Reply)


def seeds() -> list[bytes]:
    """Valid inputs (class byte, split byte, body) to start a corpus from."""
    when = dt.datetime(2024, 2, 29, 12, 0, 1, 5, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    messages: list[Any] = [
        Plain("p", count=-3, ratio=0.5, name="n", flag=True, raw=b"\x00\xff"),
        Sparse("s"),
        Sparse("s", a=2**70, b="b", c=Label(1, 2, None, "t"), d=[1, 2], e=when, f=Hue.BLUE),
        Deep(
            "d",
            origin=Spot3(1, 2, 3.5),
            path=[Spot(0, 0), Label(1, 1, 0.5, "x")],
            grid=[[1], []],
            names=("a", "b"),
            extra=Spot3(0, 0),
        ),
        Rich(
            "r",
            dec=Decimal("-1.50"),
            when=when,
            day=dt.date(1999, 12, 31),
            at=dt.time(1, 2, 3, 4),
            span=dt.timedelta(days=-1, microseconds=7),
            hue=Hue.RED,
            perm=Perm.R | Perm.W,
            ident=uuid.UUID(int=12345),
            v4=ipaddress.IPv4Address("192.0.2.7"),
            v6=ipaddress.IPv6Address("2001:db8::7"),
            peer=SocketAddress("localhost", 80),
            key=MessageKey(Plain, "/k"),
        ),
        Ask("q", query="what", limit=3),
        Answer("q", rows=[Spot(1, 2), Spot3(3, 4, 5.0)]),
        Reply("q"),
    ]
    out = []
    for index, message in enumerate(messages):
        cls_byte = CLASSES.index(type(message))
        out.append(bytes([cls_byte, index * 37 % 256]) + codec_module.encode(message))
    return out


def split(payload: bytes, seed: int) -> list[bytes]:
    """Cut ``payload`` into non-empty reads at points chosen by ``seed``."""
    if len(payload) < 2:
        return [payload] if payload else []
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(payload)), min(len(payload) - 1, 1 + seed % 16)))
    bounds = [0, *cuts, len(payload)]
    return [payload[a:b] for a, b in itertools.pairwise(bounds)]


# msgpack's own refusals of bytes (its exception tree and the ValueErrors it raises
# for bad UTF-8 and map keys); CodecError is what the ext_hook path may raise.
_UNPACK_ERRORS = (msgpack.UnpackException, ValueError, CodecError)


def _streamed(cls: type[Any], reads: list[bytes]) -> Any:
    """Decode as a link would: a streaming unpacker fed ``reads``, then from_wire.

    Returns the message, or the exception that refused the bytes."""
    unpacker = msgpack.Unpacker(
        use_list=False,
        raw=False,
        strict_map_key=True,
        ext_hook=codec_module.ext_hook,
        max_buffer_size=MAX_SIZE,
    )
    values: list[object] = []
    end = 0
    try:
        for piece in reads:
            unpacker.feed(piece)
            while True:
                try:
                    values.append(unpacker.unpack())
                except msgpack.OutOfData:
                    break
                # (tell() is read after each value: after a failed attempt it
                # counts the bytes of the incomplete value too)
                end = unpacker.tell()
    except _UNPACK_ERRORS as exc:
        return exc
    if len(values) != 1 or end != sum(len(r) for r in reads):
        return ValueError(f"{len(values)} msgpack values, or bytes left over")
    try:
        return codec_module.from_wire(cls, values[0])
    except CodecError as exc:
        return exc


def one_input(data: bytes) -> None:
    """The fuzz target: raises only when the codec breaks its contract."""
    if len(data) < 2:
        return
    cls = CLASSES[data[0] % len(CLASSES)]
    payload = data[2:]
    try:
        message = _CODEC.decode(cls, payload)
    except CodecError:
        message = None
    if message is not None:
        if type(message) is not cls:
            raise AssertionError(f"decode({cls.__name__}) returned a {type(message).__name__}")
        again = _BIG.encode(message)  # a decoded message must encode
        back = _BIG.decode(cls, again)
        if _BIG.encode(back) != again:
            raise AssertionError(f"{cls.__name__}: decode(encode(m)) encodes differently: {back!r}")
    # The same bytes fed whole and in pieces, as a socket delivers them.
    for reads in ([payload] if payload else [], split(payload, data[1])):
        streamed = _streamed(cls, reads)
        if message is None:
            if not isinstance(streamed, BaseException):
                raise AssertionError(
                    f"{cls.__name__}: decode() refused the bytes, streaming gave {streamed!r}"
                )
        elif isinstance(streamed, BaseException) or _BIG.encode(streamed) != again:
            raise AssertionError(
                f"{cls.__name__}: decode() gave {message!r}, streaming gave {streamed!r}"
            )
    # What a link hands over: msgpack values with raw ExtType, no ext_hook.
    try:
        obj = msgpack.unpackb(payload, use_list=False, raw=False, strict_map_key=True)
    except _UNPACK_ERRORS:
        return
    with contextlib.suppress(CodecError):
        codec_module.from_wire(cls, obj)


def main() -> None:
    """Run under atheris (libFuzzer arguments in ``sys.argv``)."""
    fuzz(one_input)


if __name__ == "__main__":
    main()
