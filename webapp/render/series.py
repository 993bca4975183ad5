"""TimeSeries: the list of datapoints that every render function consumes and returns."""

from __future__ import annotations

from webapp import pysum

import re
from typing import Any, Callable, Iterable, Iterator, Optional

DEFAULT_XFILES_FACTOR = 0.0

_FUNCTION_NAME = re.compile(r'^[a-z]+[(].+[)]$', re.IGNORECASE)


class Tags(dict):
    """Tag mapping whose values are always stored as strings (as graphite-web does)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self.update(*args, **kwargs)

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, str(value))

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        source = dict(*args, **kwargs)
        if all(type(value) is str for value in source.values()):
            dict.update(self, source)
            return
        for key, value in source.items():
            self[key] = value

    def setdefault(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        if key not in self:
            self[key] = default
        return self[key]

    def copy(self) -> Tags:
        return Tags(self)


def parse_tags(name: str) -> dict[str, str]:
    """Tags of a series name: ``a.b;k=v`` -> {'name': 'a.b', 'k': 'v'}; untagged -> {'name': name}.

    The OpenMetrics form ``a_b{k="v"}`` is understood too.  A name that is not a valid
    tagged path, or looks like a function call, yields ``{'name': name}``.
    """
    if not isinstance(name, str) or (';' not in name and name[-1:] != '}') or \
            _FUNCTION_NAME.match(name):
        return {'name': name}
    if name.endswith('}') and '{' in name and not name.startswith('{'):
        metric, _, rest = name[:-1].partition('{')
        tags: dict[str, str] = {}
        for part in _split_openmetrics(rest):
            key, eq, value = part.partition('=')
            key = key.strip()
            value = value.strip()
            if not eq or not key or len(value) < 2 or value[0] != '"' or value[-1] != '"':
                return {'name': name}
            tags[key] = value[1:-1].replace('\\"', '"').replace('\\\\', '\\')
        tags['name'] = metric
        return tags
    if ';' not in name:
        return {'name': name}
    metric, *segments = name.split(';')
    tags = {}
    for segment in segments:
        key, eq, value = segment.partition('=')
        if not eq or not key or not value or '(' in key or ' ' in key:
            return {'name': name}
        tags[key] = value
    tags['name'] = metric
    return tags


def _split_openmetrics(text: str) -> list[str]:
    parts, buf, quoted, escaped = [], [], False, False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == '\\':
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == ',' and not quoted:
            parts.append(''.join(buf))
            buf = []
            continue
        buf.append(ch)
    if ''.join(buf).strip():
        parts.append(''.join(buf))
    return parts


def _avg(values: list) -> Any:
    return pysum.total(values) / len(values)


CONSOLIDATION_FUNCTIONS: dict[str, Callable[[list], Any]] = {
    'sum': sum,
    'average': _avg,
    'avg': _avg,
    'avg_zero': _avg,
    'max': max,
    'min': min,
    'first': lambda v: v[0],
    'last': lambda v: v[-1],
}


def xff(non_null: int, total: float, x_files_factor: Optional[float] = None) -> bool:
    """Whether ``non_null`` known values out of ``total`` meet the xFilesFactor ratio
    (consolidation here, the functions' windows through webapp.functions.common)."""
    if not non_null or not total:
        return False
    return non_null / total >= (x_files_factor or 0.0)


class TimeSeries(list):
    """A named list of values at ``start + i * step``, like graphite-web's TimeSeries.

    Iterating yields values consolidated by ``valuesPerPoint`` (see :meth:`consolidate`);
    indexing and ``list.__iter__`` give the raw values.
    """

    def __init__(self, name: str, start: int, end: int, step: int, values: Iterable,
                 consolidate: str = 'average', tags: Optional[dict] = None,
                 xFilesFactor: Optional[float] = None,
                 pathExpression: Optional[str] = None) -> None:
        list.__init__(self, values)
        self.name = name
        self.start = start
        self.end = end
        self.step = step
        self.consolidationFunc = consolidate
        self.valuesPerPoint = 1
        self.options: dict[str, Any] = {}
        self.pathExpression = pathExpression or name
        self.xFilesFactor = DEFAULT_XFILES_FACTOR if xFilesFactor is None else xFilesFactor
        if tags:
            self.tags = tags
        else:                  # parse_tags gives strings only: no checks needed
            self._tags = dict.__new__(Tags)
            dict.update(self._tags, parse_tags(name))

    @property
    def tags(self) -> Tags:
        """Tag dict of the series; values are coerced to strings."""
        return self._tags

    @tags.setter
    def tags(self, tags: dict) -> None:
        self._tags = tags if isinstance(tags, Tags) else Tags(tags)

    def __repr__(self) -> str:
        return 'TimeSeries(name=%s, start=%s, end=%s, step=%s, valuesPerPoint=%s, ' \
               'consolidationFunc=%s, xFilesFactor=%s)' % (
                   self.name, self.start, self.end, self.step, self.valuesPerPoint,
                   self.consolidationFunc, self.xFilesFactor)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TimeSeries):
            return False
        # ``color`` is set on a series only by color() and the graph's colorList
        return ((self.name, self.start, self.end, self.step, self.consolidationFunc,
                 self.valuesPerPoint, self.options, self.xFilesFactor,
                 getattr(self, 'color', None))
                == (other.name, other.start, other.end, other.step, other.consolidationFunc,
                    other.valuesPerPoint, other.options, other.xFilesFactor,
                    getattr(other, 'color', None))
                and list.__eq__(self, other))

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __iter__(self) -> Iterator:
        if self.valuesPerPoint > 1:
            return self._consolidated(list.__iter__(self))
        return list.__iter__(self)

    def consolidate(self, valuesPerPoint: int) -> None:
        """Make iteration merge every ``valuesPerPoint`` raw values into one."""
        self.valuesPerPoint = int(valuesPerPoint)

    def consolidate_values(self, values: list) -> Any:
        """One consolidated value from a bucket of raw values (None if xFilesFactor unmet)."""
        func = CONSOLIDATION_FUNCTIONS.get(self.consolidationFunc)
        if func is None:
            raise ValueError("Invalid consolidation function: '%s'" % self.consolidationFunc)
        non_null = [v for v in values if v is not None]
        if not xff(len(non_null), self.valuesPerPoint, self.xFilesFactor):
            return None
        if self.consolidationFunc == 'avg_zero':
            return pysum.total(non_null) / len(values)
        return func(non_null)

    def _consolidated(self, raw: Iterator) -> Iterator:
        buf: list = []
        for value in raw:
            buf.append(value)
            if len(buf) == self.valuesPerPoint:
                yield self.consolidate_values(buf)
                buf = []
        if buf:
            yield self.consolidate_values(buf)

    def datapoints(self) -> list[list]:
        """``[[value, timestamp], ...]`` after consolidation, as the JSON format emits."""
        step = int(self.step * self.valuesPerPoint) or 1
        timestamps = range(int(self.start), int(self.end) + 1, step)
        return [[value, ts] for value, ts in zip(self, timestamps, strict=False)]

    def getInfo(self) -> dict[str, Any]:
        """Metadata plus consolidated values, as the pickle/raw formats use."""
        return {
            'name': self.name,
            'start': self.start,
            'end': self.end,
            'step': self.step,
            'values': list(self),
            'pathExpression': self.pathExpression,
            'valuesPerPoint': self.valuesPerPoint,
            'consolidationFunc': self.consolidationFunc,
            'xFilesFactor': self.xFilesFactor,
        }

    def copy(self, name: Optional[str] = None, start: Optional[int] = None,
             end: Optional[int] = None, step: Optional[int] = None,
             values: Optional[Iterable] = None, consolidate: Optional[str] = None,
             tags: Optional[dict] = None, xFilesFactor: Optional[float] = None) -> TimeSeries:
        """A new series with the given fields replaced, like graphite-web's ``copy``.

        As there, the copy shares the tag dict, takes its new name as pathExpression and
        starts with empty render options.
        """
        return TimeSeries(
            self.name if name is None else name,
            self.start if start is None else start,
            self.end if end is None else end,
            self.step if step is None else step,
            list(list.__iter__(self)) if values is None else values,
            consolidate=self.consolidationFunc if consolidate is None else consolidate,
            tags=self.tags if tags is None else tags,
            xFilesFactor=self.xFilesFactor if xFilesFactor is None else xFilesFactor,
        )


class PackedSeries(TimeSeries):
    """A series straight from a fetch whose values are still a packed whisper row.

    Its list content stays empty until :meth:`materialize`; only render code that
    checks ``packed`` (JSON writer, fused aggregates) may see it unmaterialised.
    """

    def __init__(self, name: str, start: int, end: int, step: int, packed: Any,
                 **kwargs: Any) -> None:
        super().__init__(name, start, end, step, (), **kwargs)
        self.packed = packed
        self.drop = 0

    @classmethod
    def fetched(cls, rows: list[tuple[str, tuple[int, int, int], Any]],
                xFilesFactor: Optional[float], pathExpression: str) -> list[PackedSeries]:
        """``PackedSeries(name, start, end, step, packed, xFilesFactor=...,
        pathExpression=...)`` for each (name, (start, end, step), packed) of a fetch: the
        first is built by the constructor, the others copy its attributes and set their
        own (a wildcard's 10,000 series without 10,000 constructor calls)."""
        if not rows:
            return []
        name, (start, end, step), values = rows[0]
        first = cls(name, start, end, step, values, xFilesFactor=xFilesFactor,
                    pathExpression=pathExpression)
        out = [first]
        template = first.__dict__
        new = cls.__new__
        for name, (start, end, step), values in rows[1:]:
            series = new(cls)
            attributes = series.__dict__
            attributes.update(template)
            tags = dict.__new__(Tags)
            dict.update(tags, parse_tags(name))
            attributes.update(name=name, start=start, end=end, step=step, options={},
                              pathExpression=pathExpression or name, _tags=tags,
                              packed=values)
            out.append(series)
        return out

    def materialize(self) -> PackedSeries:
        """Fill the list with the values (minus ``drop`` leading ones); returns self."""
        if self.packed is not None:
            values = self.packed.tolist()
            list.extend(self, values[self.drop:])
            self.packed = None
            self.drop = 0
        return self


def materialize_all(seriesList: list) -> None:
    """Turn any PackedSeries of the list into plain values, in place."""
    for series in seriesList:
        if type(series) is PackedSeries:
            series.materialize()
