"""A deliberately plain model of graphite-web 1.1.10's /render?format=json body.

Written from graphite-web's documented and observed behaviour, as a specification to
test our fast paths against (not derived from its code):

* each series is ``{"target": name, "tags": tags, "datapoints": [[value, ts], ...]}``;
  timestamps run from the series start in steps of step x values-per-point up to its end
  (inclusive), paired with as many values as there are;
* with maxDataPoints = 1 every series collapses to one point; otherwise a series whose
  points over the whole response's time range exceed maxDataPoints gets
  k = ceil(points / maxDataPoints) values per point, its start moves forward by
  ``k*step + start % step - start % (k*step)`` seconds and that many steps minus one of
  its leading values are dropped;
* a group of k values is None unless it holds a non-None value and
  (non-None values) / k >= xFilesFactor; otherwise it is the consolidation function of
  the non-None values (avg_zero counts a None as 0 and divides by the group's size);
  sums add left to right starting from 0;
* the body is ``json.dumps`` of the list with ``NaN,`` written ``null,`` and
  ``Infinity,`` written ``1e9999,`` (anywhere in the text, names included);
* a response in which no series has a value is ``[]``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Optional


def plain_sum(values: Any) -> Any:
    """graphite-web 1.1.10's addition: builtin sum() on the Pythons it runs on (< 3.12),
    one value after the other from 0, which the render app keeps on every Python
    (webapp/pysum.py); written out here, as 3.12's sum() is compensated."""
    total = 0
    for value in values:
        total = total + value
    return total


def _combine(name: str, values: list, group_size: int) -> Any:
    if name in ("sum",):
        return plain_sum(values)
    if name == "average":
        return plain_sum(values) / len(values)
    if name == "avg_zero":
        return plain_sum(values) / group_size
    if name == "max":
        return max(values)
    if name == "min":
        return min(values)
    if name == "first":
        return values[0]
    if name == "last":
        return values[-1]
    raise ValueError("unknown consolidation %s" % name)


@dataclass
class Series:
    name: str
    start: int
    end: int
    step: int
    values: list
    consolidate: str = "average"
    tags: Optional[dict] = None
    xFilesFactor: float = 0.0  # noqa: N815 (graphite's attribute name)
    per_point: int = field(default=1)

    def grouped(self) -> list:
        k = self.per_point
        if k <= 1:
            return list(self.values)
        out = []
        for first in range(0, len(self.values), k):
            group = self.values[first:first + k]
            present = [v for v in group if v is not None]
            if not present or len(present) / k < self.xFilesFactor:
                out.append(None)
            elif self.consolidate == "avg_zero":
                out.append(_combine("avg_zero", [0 if v is None else v for v in group],
                                    len(group)))
            else:
                out.append(_combine(self.consolidate, present, len(group)))
        return out

    def points(self) -> list:
        stamps = range(int(self.start), int(self.end) + 1, int(self.step * self.per_point))
        return [[value, stamp] for value, stamp in zip(self.grouped(), stamps)]  # noqa: B905


def render_json_body(series: list[Series], max_data_points: Optional[int] = None) -> bytes:
    """The response body graphite-web 1.1.10 gives for ``series``."""
    if not any(s.values for s in series):
        return b"[]"
    span = max(s.end for s in series) - min(s.start for s in series)
    out = []
    for s in series:
        if max_data_points == 1:
            s.per_point = max(len(s.values), 1)
        elif max_data_points is not None and max_data_points < span / s.step:
            k = math.ceil(span / s.step / max_data_points)
            shift = k * s.step + s.start % s.step - s.start % (k * s.step)
            s.start += shift
            del s.values[:max(int(shift / s.step) - 1, 0)]
            s.per_point = k
        out.append({"target": s.name, "tags": dict(s.tags or {"name": s.name}),
                    "datapoints": s.points()})
    text = json.dumps(out).replace("NaN,", "null,").replace("Infinity,", "1e9999,")
    return text.encode("utf-8")
