"""sumSeries/averageSeries of bare paths computed on packed whisper rows.

``sumSeries(a.*.b)`` is the most common aggregate; when every argument is a plain
path and the fetched series are packed rows of one length and time range, the sum is
done on the arrays instead of on per-point Python lists. The result is the one
``webapp.functions.combine.aggregate`` gives: same name, tags and xFilesFactor rule,
and the same addition per point as builtin sum() (series in name order, starting from
0, empty slots skipped; compensated from Python 3.12 as sum() is), so the floats are
bit-identical.
"""

from __future__ import annotations

from typing import Any, Optional

from webapp.functions.combine import aggregate_name_tags
from webapp.render.fetch import fetch_series
from webapp.render import pysum
from webapp.render.grammar import Call, PathExpr
from webapp.render.series import PackedSeries, TimeSeries
from webapp.storage import packed


def fused_aggregate(ctx: dict[str, Any], node: Call, fn: Any) -> Optional[list[TimeSeries]]:
    """The aggregate's result, or None when the generic evaluation must run."""
    func = getattr(fn.func, 'fused_aggregate', None)
    if func is None or not packed.ENABLED or node.kwargs or not node.args or \
            any(type(arg) is not PathExpr for arg in node.args):
        return None
    series: list[TimeSeries] = []
    for arg in node.args:
        series.extend(fetch_series(ctx, arg.path, packed=True))
    if not series or any(not isinstance(s, PackedSeries) or s.packed is None for s in series):
        return None
    first = series[0]
    if any((s.start, s.end, s.step) != (first.start, first.end, first.step) for s in series):
        return None
    arrays = packed.stack_rows([s.packed for s in series])
    if arrays is None:
        return None
    values, valid = arrays
    np = packed.np
    acc = np.zeros(values.shape[1])
    count = valid.sum(axis=0)
    xff = ctx.get('xFilesFactor')
    with np.errstate(all='ignore'):  # inf - inf is nan, as in Python
        comp = np.zeros_like(acc)
        for row in np.where(valid, values, 0.0):
            pysum.add_into(np, acc, comp, row)
        acc = pysum.result(np, acc, comp)
        ok = (count > 0) & (count / len(series) >= (xff or 0.0))
        if func == 'average':
            acc = np.divide(acc, count, out=np.zeros_like(acc), where=count > 0)
    result = acc.tolist()
    if not ok.all():
        for i in np.flatnonzero(~ok).tolist():
            result[i] = None
    ctx['args'] = node.args
    name, tags = aggregate_name_tags(series, func)
    return [TimeSeries(name, first.start, first.end, first.step, result, xFilesFactor=xff,
                       tags=tags)]
