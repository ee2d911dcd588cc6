"""The native field types: bool, int (and the timestamp field), float, str, bytes.

Their wire form is the value itself, so the generated codecs (:mod:`.codec`) pass
them through and inline ``type(v) is int`` checks rather than calling them; ``check``
only turns a subclass instance into the exact type.  They are kept together, apart
from the types with a wire form of their own (:mod:`._converted`), because they share
that "native" property the codec relies on.
"""

from __future__ import annotations

from ._fieldtype import FieldType, _Mismatch
from ._packing import big_int_from_wire


class _Bool(FieldType):
    __slots__ = ()

    def check(self, value: object) -> object:
        if type(value) is bool:
            return value
        raise _Mismatch("bool", value)

    def from_wire(self, obj: object) -> object:
        return self.check(obj)


class _Int(FieldType):
    __slots__ = ()

    def check(self, value: object) -> object:
        if type(value) is int:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return int.__int__(value)  # an int subclass (IntEnum...) as a plain int
        raise _Mismatch("int", value, "bool is not an int here" if type(value) is bool else "")

    def from_wire(self, obj: object) -> object:
        if type(obj) is int:
            return obj
        if type(obj) is bytes:
            return big_int_from_wire(obj)
        raise _Mismatch("int", obj)


TIMESTAMP_MAX = (1 << 63) - 1


class _Timestamp(_Int):
    """The ``timestamp`` base field: int epoch milliseconds in 0..2**63-1."""

    __slots__ = ()

    def check(self, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            if 0 <= value <= TIMESTAMP_MAX:
                return int.__int__(value)
            raise _Mismatch(self.display, value, "out of range")
        raise _Mismatch(self.display, value)

    def from_wire(self, obj: object) -> object:
        if type(obj) is int and 0 <= obj <= TIMESTAMP_MAX:
            return obj
        raise _Mismatch(self.display, obj)


TIMESTAMP = _Timestamp(int, "int epoch milliseconds in 0..2**63-1", native=True)


class _Float(FieldType):
    __slots__ = ()

    def check(self, value: object) -> object:
        if type(value) is float:
            return value
        if isinstance(value, float):
            return float.__float__(value)
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return int.__float__(value)
            except OverflowError:
                raise _Mismatch("float", value, "int too large for a float") from None
        raise _Mismatch("float", value)

    def from_wire(self, obj: object) -> object:
        # A peer may send an integral value as a msgpack int (the constructor
        # accepts ints too); a bool or a big-int bin is not a float.
        if type(obj) is float:
            return obj
        if type(obj) is int:
            return float(obj)
        raise _Mismatch("float", obj)


class _Str(FieldType):
    __slots__ = ()

    def check(self, value: object) -> object:
        if type(value) is str:
            return value
        if isinstance(value, str):
            return str.__str__(value)  # the characters, not a subclass's __str__
        raise _Mismatch("str", value)

    def from_wire(self, obj: object) -> object:
        if type(obj) is str:
            return obj
        raise _Mismatch("str", obj)


class _Bytes(FieldType):
    __slots__ = ()

    def check(self, value: object) -> object:
        if type(value) is bytes:
            return value
        if isinstance(value, bytes):
            return bytes.__bytes__(value)
        if isinstance(value, (bytearray, memoryview)):
            return bytes(value)
        raise _Mismatch("bytes", value)

    def from_wire(self, obj: object) -> object:
        if type(obj) is bytes:
            return obj
        raise _Mismatch("bytes", obj)


#: The native types by annotation (:func:`._types.compile_type` looks them up).
_NATIVES: dict[object, FieldType] = {
    bool: _Bool(bool, "bool", native=True),
    int: _Int(int, "int", native=True),
    float: _Float(float, "float", native=True),
    str: _Str(str, "str", native=True),
    bytes: _Bytes(bytes, "bytes", native=True),
}
