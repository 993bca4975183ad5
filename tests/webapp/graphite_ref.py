"""graphite-web 1.1.10's JSON rendering, ported line by line, as a test oracle.

``RefSeries`` is graphite.render.datalib.TimeSeries (iteration, consolidation,
datapoints) and ``ref_render_json`` is graphite.render.views.renderViewJson without
pretty printing. Sums are written out as sequential additions from 0, which is what
``sum()`` does on the Python versions graphite-web 1.1.10 runs on (3.12 changed
``sum()`` of floats to a compensated algorithm).
"""

from __future__ import annotations

import json
import math
from functools import reduce
from operator import add
from typing import Any, Iterator, Optional


def seq_sum(values: list) -> Any:
    return reduce(add, values, 0)


CONSOLIDATION = {
    'sum': seq_sum,
    'average': lambda usable: seq_sum(usable) / len(usable),
    'avg_zero': lambda usable: seq_sum(usable) / len(usable),
    'max': max,
    'min': min,
    'first': lambda usable: usable[0],
    'last': lambda usable: usable[-1],
}


class RefSeries(list):
    def __init__(self, name: str, start: int, end: int, step: int, values: list,
                 consolidate: str = 'average', tags: Optional[dict] = None,
                 xFilesFactor: float = 0.0) -> None:
        list.__init__(self, values)
        self.name, self.start, self.end, self.step = name, start, end, step
        self.consolidationFunc = consolidate
        self.valuesPerPoint = 1
        self.xFilesFactor = xFilesFactor
        self.tags = tags or {'name': name}

    def __iter__(self) -> Iterator:
        if self.valuesPerPoint > 1:
            return self._consolidating(list.__iter__(self))
        return list.__iter__(self)

    def consolidate(self, values_per_point: int) -> None:
        self.valuesPerPoint = int(values_per_point)

    def _consolidating(self, gen: Iterator) -> Iterator:
        cf = CONSOLIDATION[self.consolidationFunc]
        buf: list = []
        valcnt = 0
        non_null = 0
        for x in gen:
            valcnt += 1
            if x is not None:
                buf.append(x)
                non_null += 1
            elif self.consolidationFunc == 'avg_zero':
                buf.append(0)
            if valcnt == self.valuesPerPoint:
                if non_null and (non_null / self.valuesPerPoint) >= self.xFilesFactor:
                    yield cf(buf)
                else:
                    yield None
                buf = []
                valcnt = 0
                non_null = 0
        if valcnt > 0:
            if non_null and (non_null / self.valuesPerPoint) >= self.xFilesFactor:
                yield cf(buf)
            else:
                yield None

    def datapoints(self) -> list:
        timestamps = range(int(self.start), int(self.end) + 1,
                           int(self.step * self.valuesPerPoint))
        return list(zip(self, timestamps, strict=False))


def ref_render_json(data: list[RefSeries], max_data_points: Optional[int] = None) -> bytes:
    """renderViewJson's body for ``data`` (mutated like graphite-web does)."""
    series_data = []
    if any(data):
        start_time = min([series.start for series in data])
        end_time = max([series.end for series in data])
        time_range = end_time - start_time
        for series in data:
            if max_data_points is not None:
                if max_data_points == 1:
                    series.consolidate(len(series))
                else:
                    number_of_points = time_range / series.step
                    if max_data_points < number_of_points:
                        values_per_point = math.ceil(float(number_of_points) /
                                                     float(max_data_points))
                        seconds_per_point = int(values_per_point * series.step)
                        nudge = seconds_per_point + (series.start % series.step) - \
                            (series.start % seconds_per_point)
                        series.start = series.start + nudge
                        values_to_lose = int(nudge / series.step)
                        for _ in range(1, values_to_lose):
                            del series[0]
                        series.consolidate(values_per_point)
            datapoints = series.datapoints()
            series_data.append(dict(target=series.name, tags=dict(series.tags),
                                    datapoints=datapoints))
    output = json.dumps(series_data).replace('NaN,', 'null,').replace('Infinity,', '1e9999,')
    return output.encode('utf-8')
