"""Helpers for render function tests: fake request contexts and series builders."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Callable, Optional

from webapp.plugins import RENDER_FUNCTIONS
from webapp.render.series import TimeSeries

START = 1_699_999_200  # 2023-11-14 22:00:00 UTC, aligned to the hour
STEP = 60


def ts(name: str, values: list, start: int = START, step: int = STEP, **kw: Any) -> TimeSeries:
    """A series of ``values`` from ``start`` at ``step``."""
    return TimeSeries(name, start, start + step * len(values), step, values, **kw)


class FakeData:
    """Path -> value-at-timestamp function; serves evaluateTarget/fetchSeries."""

    def __init__(self, data: Optional[dict[str, Callable[[int], Any]]] = None,
                 step: int = STEP) -> None:
        self.data = data or {}
        self.step = step
        self.calls: list[tuple[int, int, str]] = []

    def fetch(self, ctx: dict, path: str) -> list[TimeSeries]:
        start = int(ctx['startTime'].timestamp())
        end = int(ctx['endTime'].timestamp())
        self.calls.append((start, end, path))
        names = [p for p in self.data if p == path or (path.endswith('*') and
                                                      p.startswith(path[:-1]))]
        out = []
        for name in sorted(names):
            func = self.data[name]
            values = [func(t) for t in range(start, end, self.step)]
            out.append(TimeSeries(name, start, end, self.step, values, pathExpression=path,
                                  xFilesFactor=ctx.get('xFilesFactor')))
        return out

    def evaluate(self, ctx: dict, target: Any, packed: bool = False) -> list[TimeSeries]:
        target = str(target)
        if target.startswith('group(') and target.endswith(')'):
            return [s for part in target[6:-1].split(',') for s in self.fetch(ctx, part)]
        return self.fetch(ctx, target)


def make_ctx(start: int = START, end: Optional[int] = None, data: Optional[FakeData] = None,
             first_arg: Optional[str] = None, **extra: Any) -> dict:
    """A requestContext like the app builds, backed by ``data``."""
    data = data or FakeData()
    end = start + 600 if end is None else end
    ctx = {
        'startTime': datetime.fromtimestamp(start, UTC),
        'endTime': datetime.fromtimestamp(end, UTC),
        'now': datetime.fromtimestamp(end, UTC),
        'localOnly': False, 'template': {}, 'tzinfo': UTC, 'xFilesFactor': 0.0,
        'args': [first_arg] if first_arg else [],
        'evaluateTarget': data.evaluate, 'fetchSeries': data.fetch,
    }
    ctx.update(extra)
    return ctx


def call(name: str, ctx: Optional[dict], *args: Any, **kwargs: Any) -> Any:
    """Validate the arguments like the evaluator does, then call the function."""
    fn = RENDER_FUNCTIONS.get(name)
    args_v, kwargs_v = fn.validate(list(args), kwargs)
    return fn.func(ctx if ctx is not None else make_ctx(), *args_v, **kwargs_v)


def values(series: TimeSeries) -> list:
    """Consolidated values as a plain list."""
    return list(series)
