"""X-axis labels and vertical grid lines chosen as graphite-web 1.1.10 chooses them.

The seconds each pixel of the plot covers and the time range pick one row of the table
below (the last row whose ``seconds`` is at most the seconds per pixel and whose
``max_range`` holds the range); labels, major and minor grid lines then fall on multiples
of their unit and step, counted from the start time rounded down to the unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Optional

SEC, MIN, HOUR, DAY = 1, 60, 3600, 86400
DATE_FORMAT = '%m/%d'   # graphite-web's DATE_FORMAT setting default


@dataclass(frozen=True)
class XAxisRow:
    seconds: float          # at least this many seconds per pixel
    minor: tuple[int, float]   # (unit, step) of minor grid lines
    major: tuple[int, float]   # (unit, step) of major grid lines
    label: tuple[int, float]   # (unit, step) of labels
    format: str
    max_range: Optional[int]   # the longest time range this row serves (None: any)


ROWS = (
    XAxisRow(0.00, (SEC, 5), (MIN, 1), (SEC, 5), '%H:%M:%S', 10 * MIN),
    XAxisRow(0.07, (SEC, 10), (MIN, 1), (SEC, 10), '%H:%M:%S', 20 * MIN),
    XAxisRow(0.14, (SEC, 15), (MIN, 1), (SEC, 15), '%H:%M:%S', 30 * MIN),
    XAxisRow(0.27, (SEC, 30), (MIN, 2), (MIN, 1), '%H:%M', 2 * HOUR),
    XAxisRow(0.5, (MIN, 1), (MIN, 2), (MIN, 1), '%H:%M', 2 * HOUR),
    XAxisRow(1.2, (MIN, 1), (MIN, 4), (MIN, 2), '%H:%M', 3 * HOUR),
    XAxisRow(2, (MIN, 1), (MIN, 10), (MIN, 5), '%H:%M', 6 * HOUR),
    XAxisRow(5, (MIN, 2), (MIN, 10), (MIN, 10), '%H:%M', 12 * HOUR),
    XAxisRow(10, (MIN, 5), (MIN, 20), (MIN, 20), '%H:%M', 1 * DAY),
    XAxisRow(30, (MIN, 10), (HOUR, 1), (HOUR, 1), '%H:%M', 2 * DAY),
    XAxisRow(60, (MIN, 30), (HOUR, 2), (HOUR, 2), '%H:%M', 2 * DAY),
    XAxisRow(100, (HOUR, 2), (HOUR, 4), (HOUR, 4), '%a %H:%M', 6 * DAY),
    XAxisRow(255, (HOUR, 6), (HOUR, 12), (HOUR, 12), DATE_FORMAT + ' %H:%M', 10 * DAY),
    XAxisRow(600, (HOUR, 6), (DAY, 1), (DAY, 1), DATE_FORMAT, 14 * DAY),
    XAxisRow(1000, (HOUR, 12), (DAY, 1), (DAY, 1), DATE_FORMAT, 365 * DAY),
    XAxisRow(2000, (DAY, 1), (DAY, 2), (DAY, 2), DATE_FORMAT, 365 * DAY),
    XAxisRow(4000, (DAY, 2), (DAY, 4), (DAY, 4), DATE_FORMAT, 365 * DAY),
    XAxisRow(8000, (DAY, 3.5), (DAY, 7), (DAY, 7), DATE_FORMAT, 365 * DAY),
    XAxisRow(16000, (DAY, 7), (DAY, 14), (DAY, 14), DATE_FORMAT, 365 * DAY),
    XAxisRow(32000, (DAY, 15), (DAY, 30), (DAY, 30), DATE_FORMAT, 365 * DAY),
    XAxisRow(64000, (DAY, 30), (DAY, 60), (DAY, 60), DATE_FORMAT + ' %Y', None),
    XAxisRow(100000, (DAY, 60), (DAY, 120), (DAY, 120), DATE_FORMAT + ' %Y', None),
    XAxisRow(120000, (DAY, 120), (DAY, 240), (DAY, 240), DATE_FORMAT + ' %Y', None),
)


def choose_row(time_range: float, plot_width: float) -> XAxisRow:
    """The table row for ``time_range`` seconds drawn over ``plot_width`` pixels."""
    per_pixel = float(time_range) / max(1.0, float(plot_width))
    fitting = [row for row in ROWS if row.seconds <= per_pixel
               and (row.max_range is None or row.max_range >= time_range)]
    return fitting[-1] if fitting else ROWS[-1]


def _first(start: datetime, unit: int, step: float) -> datetime:
    """``start`` rounded down to a multiple of ``step`` ``unit``s (graphite-web's rule)."""
    whole = int(step)
    if unit == SEC:
        return start.replace(second=start.second - start.second % whole, microsecond=0)
    if unit == MIN:
        return start.replace(second=0, microsecond=0, minute=start.minute - start.minute % whole)
    if unit == HOUR:
        return start.replace(second=0, microsecond=0, minute=0,
                             hour=start.hour - start.hour % whole)
    return start.replace(second=0, microsecond=0, minute=0, hour=0)


def times(start: datetime, end: datetime, unit: int, step: float,
          limit: int = 2000) -> list[datetime]:
    """Times from ``start`` (rounded down) by ``step`` ``unit``s, those in [start, end)."""
    delta = timedelta(seconds=unit * step)
    at, found = _first(start, unit, step), []
    while at < end and len(found) < limit:
        if at >= start:
            found.append(at)
        at += delta
    return found
