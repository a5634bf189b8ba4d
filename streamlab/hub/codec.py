"""A small AMQP 1.0 type codec (encoder and decoder) for the hub emulator.

Only what an Event Hubs server needs is here, but every AMQP primitive type can be
decoded (or at least skipped) so that anything a client sends is either understood or
rejected with an error, never a crash.

Python values map to AMQP types as follows when encoding: ``None`` -> null, ``bool`` ->
boolean, ``int`` -> long, ``float`` -> double, ``str`` -> string, ``bytes`` -> binary,
``uuid.UUID`` -> uuid, ``list`` -> list, ``dict`` -> map. The wrapper classes below pick
the other types (``Symbol``, ``UInt``, ``ULong``, ``Timestamp``, ...). ``Raw`` pastes
bytes that are already encoded, which lets the server echo a client's value unchanged.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = [
    "DecodeError",
    "Symbol",
    "UByte",
    "UShort",
    "UInt",
    "ULong",
    "Timestamp",
    "Raw",
    "SymbolArray",
    "Described",
    "encode",
    "decode",
    "skip",
    "split_list",
    "split_map",
]


class DecodeError(ValueError):
    """The bytes are not valid AMQP (truncated, unknown constructor, too deep)."""


class Symbol(str):
    """An AMQP symbol (ASCII name), as opposed to a UTF-8 string."""


class UByte(int):
    """AMQP ubyte."""


class UShort(int):
    """AMQP ushort."""


class UInt(int):
    """AMQP uint."""


class ULong(int):
    """AMQP ulong (performative and section descriptors use it)."""


class Timestamp(int):
    """AMQP timestamp: milliseconds since the Unix epoch."""


class Raw(bytes):
    """Bytes that are already AMQP-encoded; copied to the output verbatim."""


class SymbolArray(list):
    """An AMQP array of symbols (used for SASL mechanisms and capabilities)."""


class Described(NamedTuple):
    """A described type: a descriptor (ulong code or symbol) and its value."""

    descriptor: Any
    value: Any


_B = struct.Struct(">B")
_H = struct.Struct(">H")
_I = struct.Struct(">I")
_Q = struct.Struct(">Q")
_b = struct.Struct(">b")
_h = struct.Struct(">h")
_i = struct.Struct(">i")
_q = struct.Struct(">q")
_f = struct.Struct(">f")
_d = struct.Struct(">d")


# --------------------------------------------------------------------------- encoding


def _encode_variable(out: bytearray, small: int, large: int, data: bytes) -> None:
    if len(data) < 256:
        out.append(small)
        out.append(len(data))
    else:
        out.append(large)
        out += _I.pack(len(data))
    out += data


def _encode_compound(out: bytearray, small: int, large: int, count: int, body: bytes) -> None:
    # The size field counts the count field plus the body.
    if len(body) + 1 < 256 and count < 256:
        out.append(small)
        out.append(len(body) + 1)
        out.append(count)
    else:
        out.append(large)
        out += _I.pack(len(body) + 4)
        out += _I.pack(count)
    out += body


def encode_into(out: bytearray, value: Any) -> None:
    """Append the AMQP encoding of ``value`` to ``out``."""
    # Order matters: the wrapper classes subclass int/str/bytes/list.
    if value is None:
        out.append(0x40)
    elif isinstance(value, Raw):
        out += value
    elif isinstance(value, bool):
        out.append(0x41 if value else 0x42)
    elif isinstance(value, int):
        _encode_int(out, value)
    elif isinstance(value, Symbol):
        _encode_variable(out, 0xA3, 0xB3, value.encode("ascii", "replace"))
    elif isinstance(value, str):
        _encode_variable(out, 0xA1, 0xB1, value.encode("utf-8"))
    elif isinstance(value, (bytes, bytearray, memoryview)):
        _encode_variable(out, 0xA0, 0xB0, bytes(value))
    elif isinstance(value, float):
        out.append(0x82)
        out += _d.pack(value)
    elif isinstance(value, uuid.UUID):
        out.append(0x98)
        out += value.bytes
    elif isinstance(value, Described):
        out.append(0x00)
        encode_into(out, value.descriptor)
        encode_into(out, value.value)
    elif isinstance(value, SymbolArray):
        _encode_symbol_array(out, value)
    elif isinstance(value, (list, tuple)):
        body = bytearray()
        for item in value:
            encode_into(body, item)
        # Performatives must never use the 0x45 empty-list shortcut (the SDK's frame
        # decoder only reads list8/list32), so lists always carry a size and count.
        _encode_compound(out, 0xC0, 0xD0, len(value), bytes(body))
    elif isinstance(value, dict):
        body = bytearray()
        for key, item in value.items():
            encode_into(body, key)
            encode_into(body, item)
        _encode_compound(out, 0xC1, 0xD1, 2 * len(value), bytes(body))
    else:
        raise TypeError(f"cannot AMQP-encode {type(value).__name__}")


def _encode_int(out: bytearray, value: int) -> None:
    if isinstance(value, Timestamp):
        out.append(0x83)
        out += _q.pack(value)
    elif isinstance(value, UByte):
        out.append(0x50)
        out.append(value)
    elif isinstance(value, UShort):
        out.append(0x60)
        out += _H.pack(value)
    elif isinstance(value, UInt):
        if value == 0:
            out.append(0x43)
        elif value < 256:
            out += bytes((0x52, value))
        else:
            out.append(0x70)
            out += _I.pack(value)
    elif isinstance(value, ULong):
        if value == 0:
            out.append(0x44)
        elif value < 256:
            out += bytes((0x53, value))
        else:
            out.append(0x80)
            out += _Q.pack(value)
    elif -128 <= value <= 127:
        out += bytes((0x55, value & 0xFF))
    else:
        out.append(0x81)
        out += _q.pack(value)


def _encode_symbol_array(out: bytearray, symbols: SymbolArray) -> None:
    if not symbols:
        out.append(0x40)  # an empty array is sent as null: simpler for every decoder
        return
    encoded = [s.encode("ascii", "replace") for s in symbols]
    if all(len(e) < 256 for e in encoded):
        body = bytes([0xA3]) + b"".join(bytes([len(e)]) + e for e in encoded)
    else:
        body = bytes([0xB3]) + b"".join(_I.pack(len(e)) + e for e in encoded)
    _encode_compound(out, 0xE0, 0xF0, len(encoded), body)


def encode(value: Any) -> bytes:
    """Return the AMQP encoding of ``value``."""
    out = bytearray()
    encode_into(out, value)
    return bytes(out)


# --------------------------------------------------------------------------- decoding

_MAX_DEPTH = 32
# Fixed-width constructors: width of the data after the constructor byte.
_FIXED = {
    0x40: 0,
    0x41: 0,
    0x42: 0,
    0x43: 0,
    0x44: 0,
    0x45: 0,
    0x50: 1,
    0x51: 1,
    0x52: 1,
    0x53: 1,
    0x54: 1,
    0x55: 1,
    0x56: 1,
    0x60: 2,
    0x61: 2,
    0x70: 4,
    0x71: 4,
    0x72: 4,
    0x73: 4,
    0x74: 4,
    0x80: 8,
    0x81: 8,
    0x82: 8,
    0x83: 8,
    0x84: 8,
    0x94: 16,
    0x98: 16,
}
_FIXED_DECODERS: dict[int, Callable[[bytes], Any]] = {
    0x40: lambda b: None,
    0x41: lambda b: True,
    0x42: lambda b: False,
    0x43: lambda b: UInt(0),
    0x44: lambda b: ULong(0),
    0x45: lambda b: [],
    0x50: lambda b: UByte(b[0]),
    0x51: lambda b: _b.unpack(b)[0],
    0x52: lambda b: UInt(b[0]),
    0x53: lambda b: ULong(b[0]),
    0x54: lambda b: _b.unpack(b)[0],
    0x55: lambda b: _b.unpack(b)[0],
    0x56: lambda b: b[0] != 0,
    0x60: lambda b: UShort(_H.unpack(b)[0]),
    0x61: lambda b: _h.unpack(b)[0],
    0x70: lambda b: UInt(_I.unpack(b)[0]),
    0x71: lambda b: _i.unpack(b)[0],
    0x72: lambda b: _f.unpack(b)[0],
    0x73: lambda b: _I.unpack(b)[0],  # char (UTF-32 code point): kept as int
    0x74: bytes,  # decimal32: kept raw
    0x80: lambda b: ULong(_Q.unpack(b)[0]),
    0x81: lambda b: _q.unpack(b)[0],
    0x82: lambda b: _d.unpack(b)[0],
    0x83: lambda b: Timestamp(_q.unpack(b)[0]),
    0x84: bytes,  # decimal64: kept raw
    0x94: bytes,  # decimal128: kept raw
    0x98: lambda b: uuid.UUID(bytes=bytes(b)),
}


def _need(buf: bytes, pos: int, n: int) -> None:
    if n < 0 or pos + n > len(buf):
        raise DecodeError("truncated AMQP value")


def _sized(buf: bytes, pos: int, code: int) -> tuple[int, int]:
    """For a variable/compound constructor at ``pos``, return (data start, data end)."""
    if code & 0xF0 in (0xA0, 0xC0, 0xE0):  # one-byte size
        _need(buf, pos + 1, 1)
        size = buf[pos + 1]
        start = pos + 2
    else:  # four-byte size
        _need(buf, pos + 1, 4)
        size = _I.unpack_from(buf, pos + 1)[0]
        start = pos + 5
    _need(buf, start, size)
    return start, start + size


def skip(buf: bytes, pos: int, depth: int = 0) -> int:
    """Return the position just after the value that starts at ``pos``."""
    if depth > _MAX_DEPTH:
        raise DecodeError("AMQP value nested too deeply")
    _need(buf, pos, 1)
    code = buf[pos]
    if code == 0x00:
        return skip(buf, skip(buf, pos + 1, depth + 1), depth + 1)
    width = _FIXED.get(code)
    if width is not None:
        _need(buf, pos + 1, width)
        return pos + 1 + width
    if code in (0xA0, 0xA1, 0xA3, 0xB0, 0xB1, 0xB3, 0xC0, 0xC1, 0xD0, 0xD1, 0xE0, 0xF0):
        return _sized(buf, pos, code)[1]
    raise DecodeError(f"unknown AMQP constructor 0x{code:02x}")


def _count(buf: bytes, start: int, code: int) -> tuple[int, int]:
    """Read the element count of a compound; return (count, first element position)."""
    if code in (0xC0, 0xC1, 0xE0):
        _need(buf, start, 1)
        return buf[start], start + 1
    _need(buf, start, 4)
    return _I.unpack_from(buf, start)[0], start + 4


def split_list(buf: bytes, pos: int) -> list[bytes]:
    """Return the raw encoded elements of the list at ``pos`` (null gives [])."""
    _need(buf, pos, 1)
    if buf[pos] == 0x45:
        return []
    return split_list_like(buf, pos, (0xC0, 0xD0))


def split_map(buf: bytes, pos: int) -> list[tuple[bytes, bytes]]:
    """Return the raw encoded (key, value) pairs of the map at ``pos`` (null gives [])."""
    raw = split_list_like(buf, pos, (0xC1, 0xD1))
    if len(raw) % 2:
        raise DecodeError("map with an odd element count")
    return [(raw[i], raw[i + 1]) for i in range(0, len(raw), 2)]


def split_list_like(buf: bytes, pos: int, codes: tuple[int, int]) -> list[bytes]:
    """Raw elements of the list or map at ``pos`` whose constructor is one of ``codes``."""
    _need(buf, pos, 1)
    code = buf[pos]
    if code == 0x40:
        return []
    if code not in codes:
        raise DecodeError("unexpected constructor for a compound")
    start, end = _sized(buf, pos, code)
    count, p = _count(buf, start, code)
    items = []
    for _ in range(count):
        q = skip(buf, p)
        if q > end:
            raise DecodeError("element overruns its compound")
        items.append(bytes(buf[p:q]))
        p = q
    return items


def decode(buf: bytes, pos: int = 0, depth: int = 0) -> tuple[Any, int]:
    """Decode the value at ``pos``; return (value, position after it)."""
    if depth > _MAX_DEPTH:
        raise DecodeError("AMQP value nested too deeply")
    _need(buf, pos, 1)
    code = buf[pos]
    if code == 0x00:
        descriptor, p = decode(buf, pos + 1, depth + 1)
        value, p = decode(buf, p, depth + 1)
        return Described(descriptor, value), p
    width = _FIXED.get(code)
    if width is not None:
        _need(buf, pos + 1, width)
        return _FIXED_DECODERS[code](buf[pos + 1 : pos + 1 + width]), pos + 1 + width
    if code in (0xA0, 0xB0, 0xA1, 0xB1, 0xA3, 0xB3):
        start, end = _sized(buf, pos, code)
        data = bytes(buf[start:end])
        if code in (0xA0, 0xB0):
            return data, end
        text = data.decode("utf-8", "replace")
        return (Symbol(text) if code in (0xA3, 0xB3) else text), end
    if code in (0xC0, 0xD0, 0xC1, 0xD1):
        start, end = _sized(buf, pos, code)
        count, p = _count(buf, start, code)
        items = []
        for _ in range(count):
            item, p = decode(buf, p, depth + 1)
            if p > end:
                raise DecodeError("element overruns its compound")
            items.append(item)
        if code in (0xC0, 0xD0):
            return items, end
        if count % 2:
            raise DecodeError("map with an odd element count")
        result = {}
        for i in range(0, count, 2):
            key = items[i]
            try:
                result[key] = items[i + 1]
            except TypeError:  # unhashable key (a list or map): keep it readable
                result[repr(key)] = items[i + 1]
        return result, end
    if code in (0xE0, 0xF0):
        return _decode_array(buf, pos, code, depth)
    raise DecodeError(f"unknown AMQP constructor 0x{code:02x}")


def _decode_array(buf: bytes, pos: int, code: int, depth: int) -> tuple[list, int]:
    start, end = _sized(buf, pos, code)
    count, p = _count(buf, start, code)
    if count == 0:
        return [], end
    _need(buf, p, 1)
    element_code = buf[p]
    if element_code == 0x00:
        raise DecodeError("arrays of described types are not supported")
    if count > end - p and _FIXED.get(element_code) == 0 and count > 65536:
        # Zero-width elements (null, true, ...) take no bytes: bound them explicitly.
        raise DecodeError("array too long")
    p += 1
    items = []
    for _ in range(count):
        # Array elements share one constructor: splice it in front of each element.
        width = _FIXED.get(element_code)
        if width is not None:
            q = p + width
        elif element_code in (0xA0, 0xA1, 0xA3, 0xC0, 0xC1, 0xE0):
            _need(buf, p, 1)
            q = p + 1 + buf[p]
        elif element_code in (0xB0, 0xB1, 0xB3, 0xD0, 0xD1, 0xF0):
            _need(buf, p, 4)
            q = p + 4 + _I.unpack_from(buf, p)[0]
        else:
            raise DecodeError(f"unknown array element constructor 0x{element_code:02x}")
        if q > end:
            raise DecodeError("array element overruns its array")
        item, _ = decode(bytes([element_code]) + bytes(buf[p:q]), 0, depth + 1)
        items.append(item)
        p = q
    return items, end
