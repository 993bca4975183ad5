"""Columnar whisper values: numpy blocks kept unmaterialised until a consumer needs lists.

Whisper reads that share a time range and length are decoded together into one
:class:`Block` (``values``: float64, 0.0 where no point is stored; ``valid``: bool; both
``(series, points)`` and read-only). Each series gets a :class:`PackedValues` row
reference; ``tolist()`` gives exactly what ``whisper.fetch`` returns (floats, None where
the slot holds no point).
Render code that knows a series is untouched since the fetch (bare path targets,
aggregates applied directly to paths) works on the arrays instead.

numpy is optional (it comes with matplotlib); without it, or with ``ENABLED`` set to
False, readers return plain lists and every consumer takes the list path.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

try:  # pragma: no cover - exercised by whichever environment runs the tests
    import numpy as np
except ImportError:  # pragma: no cover
    np = None  # type: ignore[assignment]

ENABLED = np is not None


class Block:
    """Values of several series sharing ``time_info`` and point count."""

    __slots__ = ('values', 'valid', 'time_info')

    def __init__(self, values: Any, valid: Any, time_info: tuple[int, int, int]) -> None:
        values.flags.writeable = False
        valid.flags.writeable = False
        self.values = values
        self.valid = valid
        self.time_info = time_info


class PackedValues:
    """One row of a :class:`Block`; behaves as the value list only through ``tolist()``."""

    __slots__ = ('block', 'row')

    def __init__(self, block: Block, row: int) -> None:
        self.block = block
        self.row = row

    def __len__(self) -> int:
        return int(self.block.values.shape[1])

    @property
    def values(self) -> Any:
        return self.block.values[self.row]

    @property
    def valid(self) -> Any:
        return self.block.valid[self.row]

    def tolist(self) -> list:
        """The value list with None in empty slots (as ``whisper.fetch``)."""
        out = self.values.tolist()
        valid = self.valid
        if not valid.all():
            for i in np.flatnonzero(~valid).tolist():
                out[i] = None
        return out

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedValues):
            other = other.tolist()
        return self.tolist() == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return 'PackedValues(%r)' % (self.tolist(),)


def to_list(values: Any) -> list:
    """A plain list for ``values`` (a list, or PackedValues materialised)."""
    if isinstance(values, PackedValues):
        return values.tolist()
    return values


def value_lists(values: Any, ok: Any) -> list:
    """``values`` (a float64 array, 1-D or 2-D) as nested lists of floats with None where
    ``ok`` is False."""
    cells = values.astype(object)
    cells[~ok] = None
    return cells.tolist()


def stack_rows(rows: Sequence[PackedValues]) -> Optional[tuple[Any, Any]]:
    """(values, valid) 2-D arrays of the given rows, or None when their lengths differ."""
    if not rows:
        return None
    first = rows[0].block
    if all(r.block is first for r in rows):
        index = [r.row for r in rows]
        if index == list(range(first.values.shape[0])):
            return first.values, first.valid
        return first.values[index], first.valid[index]
    width = first.values.shape[1]
    if any(r.block.values.shape[1] != width for r in rows):
        return None
    return (np.stack([r.values for r in rows]), np.stack([r.valid for r in rows]))


def decode_block(chunks: list[Optional[bytes]], time_info: tuple[int, int, int],
                 points: int) -> Block:
    """Decode whisper point bytes (``!Ld`` records) of several files into one Block.

    A None chunk is an empty archive (every slot empty). A slot is valid when its
    stored timestamp is the one expected there, as ``whisper.fetch`` decides.
    """
    from_interval, _, step = time_info
    size = points * 12
    raw = b''.join(c if c is not None else bytes(size) for c in chunks)
    records = np.frombuffer(raw, dtype=_RECORD).reshape(len(chunks), points)
    expected = np.arange(from_interval, from_interval + points * step, step, dtype=np.int64)
    valid = records['t'].astype(np.int64) == expected
    for row, chunk in enumerate(chunks):
        if chunk is None:
            valid[row] = False
    values = records['v'].astype(np.float64)
    values[~valid] = 0.0
    return Block(values, valid, time_info)


_RECORD = np.dtype([('t', '>u4'), ('v', '>f8')]) if np is not None else None
