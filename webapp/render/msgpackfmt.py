"""format=msgpack: graphite-web 1.1's remote-fetch format, written without a msgpack library.

The encoding is MessagePack's smallest form for each value, as msgpack-python
(``use_bin_type=True``) and graphite-web's bundled umsgpack both write it: fixint/uint/int
families for integers, float 64 for every float, str8 and up for text, None as nil.
"""

from __future__ import annotations

from struct import Struct
from typing import Any

_DOUBLE = Struct('>Bd')
_U8, _U16, _U32, _U64 = Struct('>BB'), Struct('>BH'), Struct('>BI'), Struct('>BQ')
_I8, _I16, _I32, _I64 = Struct('>Bb'), Struct('>Bh'), Struct('>Bi'), Struct('>Bq')


def _int(value: int) -> bytes:
    if 0 <= value < 128:
        return bytes((value,))
    if value < 0:
        if value >= -32:
            return bytes((value & 0xff,))
        for limit, packer, tag in ((1 << 7, _I8, 0xd0), (1 << 15, _I16, 0xd1),
                                   (1 << 31, _I32, 0xd2), (1 << 63, _I64, 0xd3)):
            if value >= -limit:
                return packer.pack(tag, value)
        raise OverflowError('integer too small for msgpack: %d' % value)
    for limit, packer, tag in ((1 << 8, _U8, 0xcc), (1 << 16, _U16, 0xcd),
                               (1 << 32, _U32, 0xce), (1 << 64, _U64, 0xcf)):
        if value < limit:
            return packer.pack(tag, value)
    raise OverflowError('integer too large for msgpack: %d' % value)


def _header(size: int, fix: int, fix_limit: int, tag16: int) -> bytes:
    if size < fix_limit:
        return bytes((fix | size,))
    if size < 1 << 16:
        return _U16.pack(tag16, size)
    return _U32.pack(tag16 + 1, size)


def _str(text: str) -> bytes:
    raw = text.encode('utf-8')
    size = len(raw)
    if size < 32:
        return bytes((0xa0 | size,)) + raw
    if size < 1 << 8:
        return _U8.pack(0xd9, size) + raw
    return _header(size, 0, 0, 0xda) + raw


def pack(value: Any, out: list) -> None:
    """Append ``value``'s MessagePack bytes to ``out`` (None, bool, int, float, str, list,
    tuple, dict; a numpy scalar counts as its Python value)."""
    kind = type(value)
    if kind is float:
        out.append(_DOUBLE.pack(0xcb, value))
    elif value is None:
        out.append(b'\xc0')
    elif kind is bool:
        out.append(b'\xc3' if value else b'\xc2')
    elif kind is int:
        out.append(_int(value))
    elif kind is str:
        out.append(_str(value))
    elif kind in (list, tuple) or isinstance(value, (list, tuple)):
        out.append(_header(len(value), 0x90, 16, 0xdc))
        double = _DOUBLE.pack
        for item in value:
            if type(item) is float:
                out.append(double(0xcb, item))
            elif item is None:
                out.append(b'\xc0')
            else:
                pack(item, out)
    elif isinstance(value, dict):
        out.append(_header(len(value), 0x80, 16, 0xde))
        for key, item in value.items():
            pack(key, out)
            pack(item, out)
    elif isinstance(value, bool):
        out.append(b'\xc3' if value else b'\xc2')
    elif isinstance(value, int):
        out.append(_int(int(value)))
    elif isinstance(value, float) or hasattr(value, '__float__'):  # numpy scalars and the like
        out.append(_DOUBLE.pack(0xcb, float(value)))
    elif isinstance(value, str):
        out.append(_str(str(value)))
    else:
        raise TypeError('cannot write %r as msgpack' % type(value).__name__)


def dumps(value: Any) -> bytes:
    """``value`` as MessagePack bytes."""
    out: list = []
    pack(value, out)
    return b''.join(out)
