"""The render app's sums: graphite-web 1.1.10's additions, on every Python.

graphite-web adds with builtin ``sum()`` and runs only on Pythons before 3.12 (Django 2.2),
where ``sum()`` adds one value after the other from 0. From 3.12 ``sum()`` is
Neumaier-compensated (a running total and a running correction, the correction added once
at the end where it is non-zero and finite), which changes the last bits of some sums
(``[1e16, 1.0, -1e16]``: 1.0 instead of 0.0). We chose drop-in fidelity: the render app
answers as graphite-web 1.1.10 does whatever Python it runs on, so sums never add with the
builtin ``sum()`` but with ``total`` (the builtin before 3.12, from 3.12 the builtin
started from a 0 that makes it take its plain loop), the numpy paths add columns in
place, and the C paths (``webapp/storage/_points.c``) are called with ``COMPENSATED``
(False). The compensated mode stays implemented here and in
C (tests check it against 3.12's ``sum()``), so the choice is this one constant.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable

# False: left to right as graphite-web 1.1.10 (docs/webapp.md, "Sums").
COMPENSATED = False

class _Start(int):
    """0 that builtin sum() does not take for an exact int: started from it, sum() skips
    its int and float fast paths (3.12's compensation lives in the float one) and adds
    with ``+``, one value after the other: graphite-web's order, at about half the speed
    of the fast path (a reduce with operator.add is slower still)."""

    __slots__ = ()


_START = _Start(0)


if sys.version_info < (3, 12):
    total = sum  # left to right before 3.12
else:
    def total(values: Iterable[Any]) -> Any:
        """``sum(values)`` as Python before 3.12 adds: one after the other from 0."""
        result = sum(values, _START)
        return 0 if result is _START else result


def add_into(np: Any, acc: Any, comp: Any, row: Any, compensated: bool = COMPENSATED) -> None:
    """``acc += row`` in place (with ``compensated``, keeping in ``comp`` the correction
    Python 3.12's sum() keeps)."""
    if not compensated:
        acc += row
        return
    summed = acc + row
    comp += np.where(np.abs(acc) >= np.abs(row), (acc - summed) + row, (row - summed) + acc)
    acc[...] = summed


def result(np: Any, acc: Any, comp: Any, compensated: bool = COMPENSATED) -> Any:
    """The sums: ``acc`` (with ``compensated``, the correction applied as Python 3.12's
    sum() applies it)."""
    if not compensated:
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
