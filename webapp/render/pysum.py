"""Column sums on numpy arrays that equal Python's builtin ``sum()`` bit for bit.

graphite-web adds with ``sum()``. Before Python 3.12 that is left-to-right addition;
from 3.12 it is Neumaier-compensated: a running total and a running correction, the
correction added once at the end where it is non-zero and finite. Adding 0.0 (an
empty slot) changes neither, just as skipping the slot does.
"""

from __future__ import annotations

import sys
from typing import Any

COMPENSATED = sys.version_info >= (3, 12)


def add_into(np: Any, acc: Any, comp: Any, row: Any) -> None:
    """``acc += row`` in place, keeping the correction in ``comp`` where sum() keeps one."""
    if not COMPENSATED:
        acc += row
        return
    total = acc + row
    comp += np.where(np.abs(acc) >= np.abs(row), (acc - total) + row, (row - total) + acc)
    acc[...] = total


def result(np: Any, acc: Any, comp: Any) -> Any:
    """The sums: ``acc`` with the correction applied as sum() applies it."""
    if not COMPENSATED:
        return acc
    return np.where((comp != 0) & np.isfinite(comp), acc + comp, acc)


def finish(np: Any, acc: Any, comp: Any, count: Any, average: bool, slots: Any,
           xff: Any) -> tuple[Any, Any]:
    """(values, ok) of sums (means with ``average``) of ``count`` values each out of
    ``slots``: ``ok`` where there is a value and ``count / slots`` reaches the
    xFilesFactor ``xff`` (a number, None for 0, or an array that broadcasts)."""
    acc = result(np, acc, comp)
    if average:
        acc = np.divide(acc, count, out=np.zeros_like(acc), where=count > 0)
    return acc, (count > 0) & (count / slots >= (0.0 if xff is None else xff))
