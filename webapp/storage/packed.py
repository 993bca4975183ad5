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

import logging
import os
from typing import Any, Callable, Optional, Sequence

try:  # pragma: no cover - exercised by whichever environment runs the tests
    import numpy as np
except ImportError:  # pragma: no cover
    np = None  # type: ignore[assignment]

ENABLED = np is not None
log = logging.getLogger("webapp.storage")


class Block:
    """Values of several series sharing ``time_info`` and point count."""

    __slots__ = ('values', 'valid', 'time_info')

    def __init__(self, values: Any, valid: Any, time_info: tuple[int, int, int]) -> None:
        values.flags.writeable = False
        valid.flags.writeable = False
        self.values = values
        self.valid = valid
        self.time_info = time_info

    @classmethod
    def computed(cls, values: Any, ok: Any) -> Block:
        """A Block of computed rows (a function's result, no time range of its own):
        ``values`` set to 0.0 where not ``ok``, as every Block holds."""
        values[~ok] = 0.0
        return cls(values, ok, (0, 0, 0))

    @property
    def points(self) -> int:
        return int(self.values.shape[1])


class FileBlock:
    """A :class:`Block` of whisper files not read yet: ``values``/``valid`` read every
    file on first use, while :func:`sum_rows` and :func:`consolidate_rows` compute sums
    straight from the files (``scan`` is the C reader, ``webapp.storage._points.scan``).

    Each row is one file: its name (bytes), and the chosen archive's offset and size.
    """

    __slots__ = ('scan', 'names', 'offsets', 'sizes', 'time_info', 'points', '_arrays')

    def __init__(self, scan: Callable[..., list], names: list[bytes], offsets: list[int],
                 sizes: list[int], time_info: tuple[int, int, int], points: int) -> None:
        self.scan = scan
        self.names = names
        self.offsets = offsets
        self.sizes = sizes
        self.time_info = time_info
        self.points = points
        self._arrays: Optional[tuple[Any, Any]] = None

    @property
    def values(self) -> Any:
        return self.arrays()[0]

    @property
    def valid(self) -> Any:
        return self.arrays()[1]

    @property
    def loaded(self) -> bool:
        return self._arrays is not None

    def arrays(self) -> tuple[Any, Any]:
        """(values, valid) of every row, read once."""
        if self._arrays is None:
            rows = list(range(len(self.names)))
            values, valid, failed = self.read(rows)
            self._log(rows, failed)
            values.flags.writeable = False
            valid.flags.writeable = False
            self._arrays = (values, valid)
        return self._arrays

    def row_arrays(self, row: int) -> tuple[Any, Any]:
        """(values, valid) of one row, read from its file alone."""
        values, valid, failed = self.read([row])
        self._log([row], failed)
        return values[0], valid[0]

    def read(self, rows: list[int]) -> tuple[Any, Any, list]:
        """(values, valid, failures) of the given rows read from their files: float64 and
        bool arrays, one row each, and (index in ``rows``, errno or 0 for a short read)
        of each file that could not be read (its row left empty)."""
        values = np.zeros((len(rows), self.points))
        valid = np.zeros((len(rows), self.points), dtype=bool)
        return values, valid, self._scan(0, rows, [], 0, 1, False, values, valid,
                                         bytearray())

    def run(self, mode: int, rows: list[int], targets: list[int], drop: int, vpp: int,
            compensated: bool, out1: Any, out2: Any, out3: Any, xff: float = 0.0) -> None:
        """``scan`` over the given rows; a file that cannot be read any more (changed
        since its header was read) adds nothing and is logged."""
        self._log(rows, self._scan(mode, rows, targets, drop, vpp, compensated,
                                   out1, out2, out3, xff))

    def _scan(self, mode: int, rows: list[int], targets: list[int], drop: int, vpp: int,
              compensated: bool, out1: Any, out2: Any, out3: Any, xff: float = 0.0) -> list:
        start, end, step = self.time_info
        return self.scan(mode, [self.names[r] for r in rows],
                         [self.offsets[r] for r in rows], [self.sizes[r] for r in rows],
                         targets, start, end, step, self.points, drop, vpp, compensated,
                         out1, out2, out3, xff)

    def _log(self, rows: list[int], failed: list) -> None:
        for index, error in failed:
            log.warning("failed fetch of whisper file %s: %s",
                        os.fsdecode(self.names[rows[index]]),
                        os.strerror(error) if error else 'Unable to read datapoints')


def _file_block(rows: Sequence[PackedValues]) -> Optional[FileBlock]:
    """The unread FileBlock every row belongs to, or None."""
    if not rows:
        return None
    block = rows[0].block
    if type(block) is not FileBlock or block.loaded or \
            any(r.block is not block for r in rows):
        return None
    return block


def sum_rows(rows: Sequence[PackedValues], targets: list[int], groups: int,
             compensated: bool) -> Optional[tuple[Any, Any, Any]]:
    """(sums, corrections, counts), ``groups`` x points each, of rows read from their
    files: row i is added into group targets[i], rows in the given order, empty slots
    skipped; with ``compensated`` the corrections are Python 3.12 sum()'s. None when the
    rows are not all unread rows of one FileBlock."""
    block = _file_block(rows)
    if block is None:
        return None
    acc = np.zeros((groups, block.points))
    comp = np.zeros_like(acc)
    count = np.zeros(acc.shape, dtype=np.int64)
    block.run(1, [r.row for r in rows], targets, 0, 1, compensated, acc, comp, count)
    return acc, comp, count


def consolidate_rows(rows: Sequence[PackedValues], drop: int, vpp: int,
                     compensated: bool) -> Optional[tuple[Any, Any, Any]]:
    """(sums, corrections, counts) of each row's buckets of ``vpp`` points after the first
    ``drop`` ones, read from the files (as :func:`sum_rows`); None as there."""
    block = _file_block(rows)
    if block is None or drop < 0 or vpp < 1:
        return None
    buckets = -(-max(0, block.points - drop) // vpp)
    acc = np.zeros((len(rows), buckets))
    comp = np.zeros_like(acc)
    count = np.zeros(acc.shape, dtype=np.int64)
    block.run(2, [r.row for r in rows], [], drop, vpp, compensated, acc, comp, count)
    return acc, comp, count


def consolidate_means(rows: Sequence[PackedValues], drop: int, vpp: int, compensated: bool,
                      xff: Optional[float]) -> Optional[Any]:
    """Each row's bucket means read from the files, NaN where a bucket has no value or
    too few for ``xff``: what ``webapp.pysum.finish`` makes of
    :func:`consolidate_rows`' sums, computed in the same pass; None as there."""
    block = _file_block(rows)
    if block is None or drop < 0 or vpp < 1:
        return None
    means = np.empty((len(rows), -(-max(0, block.points - drop) // vpp)))
    block.run(3, [r.row for r in rows], [], drop, vpp, compensated, means, bytearray(),
              bytearray(), 0.0 if xff is None else float(xff))
    return means


class PackedValues:
    """One row of a :class:`Block`; behaves as the value list only through ``tolist()``."""

    __slots__ = ('block', 'row')

    def __init__(self, block: Block, row: int) -> None:
        self.block = block
        self.row = row

    def __len__(self) -> int:
        return self.block.points

    @property
    def values(self) -> Any:
        return self.block.values[self.row]

    @property
    def valid(self) -> Any:
        return self.block.valid[self.row]

    def tolist(self) -> list:
        """The value list with None in empty slots (as ``whisper.fetch``); a row of an
        unread FileBlock is read alone (the other files stay unread)."""
        block = self.block
        if type(block) is FileBlock and not block.loaded:
            values, valid = block.row_arrays(self.row)
        else:
            values, valid = self.values, self.valid
        out = values.tolist()
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
    width = first.points
    if any(r.block.points != width for r in rows):
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
