"""Aggregates of bare paths computed on packed whisper rows.

``sumSeries(a.*.b)``, ``maxSeries(...)`` and ``groupByNode(a.*.b,1,"sumSeries")`` are
among the most common targets; when their series arguments are plain paths and the
fetched series are packed rows of one length and time range, the aggregate is done on
the arrays instead of on per-point Python lists. The result is the one
``webapp.functions.combine.aggregate`` gives: same name, tags and xFilesFactor rule;
sums add per point as graphite-web's sum() does (series in name order, left to right
from 0, empty slots skipped, on every Python: ``webapp.pysum``), max/min keep the first of
0.0 and -0.0 as Python's max()/min() do, so the floats are bit-identical. A stored NaN
sends max/min back to the generic path (Python's comparisons with NaN depend on order).
"""

from __future__ import annotations

import functools
import inspect
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Mapping, Optional

from webapp.functions.combine import aggregate_name_tags
from webapp.render.fetch import fetch_series
from webapp import pysum
from webapp.render.grammar import Call, Const, PathExpr
from webapp.render.series import PackedSeries, TimeSeries
from webapp.storage import packed

if TYPE_CHECKING:  # for the annotations only
    from webapp.functions.registry import Function

# groupByNode callbacks computed here: callback name -> aggregate function
GROUP_CALLBACKS = {'sum': 'sum', 'sumSeries': 'sum', 'average': 'average',
                   'averageSeries': 'average', 'max': 'max', 'maxSeries': 'max',
                   'min': 'min', 'minSeries': 'min'}


def _packed_series(ctx: dict[str, Any], paths: list[PathExpr]) -> Optional[list[PackedSeries]]:
    """The fetched series of ``paths`` when all are packed rows of one time range."""
    series: list[Any] = []
    for arg in paths:
        series.extend(fetch_series(ctx, arg.path, packed=True))
    if not series or any(not isinstance(s, PackedSeries) or s.packed is None for s in series):
        return None
    first = series[0]
    if any((s.start, s.end, s.step) != (first.start, first.end, first.step) for s in series):
        return None
    return series


def reduce_rows(series: list[PackedSeries], func: str, xff: Optional[float]) -> Optional[list]:
    """Point-by-point sum/average/max/min of packed series as a value list (None where
    no value or xFilesFactor unmet); None when the arrays cannot give Python's floats."""
    np = packed.np
    rows = [s.packed for s in series]
    direct = packed.sum_rows(rows, [0] * len(rows), 1, pysum.COMPENSATED) \
        if func in ('sum', 'average') else None
    if direct is not None:       # summed while reading the files
        with np.errstate(all='ignore'):
            acc, ok = pysum.finish(np, direct[0][0], direct[1][0], direct[2][0],
                                   func == 'average', len(series), xff)
        return _with_none(acc.tolist(), ok)
    arrays = packed.stack_rows(rows)
    if arrays is None:
        return None
    values, valid = arrays
    count = valid.sum(axis=0)
    with np.errstate(all='ignore'):  # inf - inf is nan, as in Python
        if func in ('sum', 'average'):
            acc = np.zeros(values.shape[1])
            comp = np.zeros_like(acc)
            for row in values:        # 0.0 where no point: as if skipped
                pysum.add_into(np, acc, comp, row)
            acc = pysum.result(np, acc, comp)
            if func == 'average':
                acc = np.divide(acc, count, out=np.zeros_like(acc), where=count > 0)
        else:
            if np.isnan(values[valid]).any():
                return None
            acc = (np.fmax if func == 'max' else np.fmin).reduce(
                np.where(valid, values, np.nan), axis=0)
        ok = (count > 0) & (count / len(series) >= (xff or 0.0))
    result = acc.tolist()
    if func in ('max', 'min'):
        # Python's max()/min() keep the first of equal values: 0.0 vs -0.0 matters
        for i in np.flatnonzero(ok & (acc == 0)).tolist():
            column = values[:, i][valid[:, i]]
            result[i] = column[np.flatnonzero(column == 0)[0]].item()
    return _with_none(result, ok)


def _with_none(result: list, ok: Any) -> list:
    """``result`` with None where ``ok`` is False."""
    if not ok.all():
        for i in packed.np.flatnonzero(~ok).tolist():
            result[i] = None
    return result


def fused_aggregate(ctx: dict[str, Any], node: Call, fn: Function,
                    packed_result: bool = False) -> Optional[list[TimeSeries]]:
    """The aggregate's (or groupByNode's, or moving window's) result, or None when the
    generic evaluation must run. With ``packed_result`` (the caller is the JSON writer)
    a moving window's series may come back as unmaterialised PackedSeries."""
    if not packed.ENABLED or node.kwargs or not node.args:
        return None
    traits = fn.traits
    if traits.fused_window is not None:
        return _fused_window(ctx, node, fn.func, traits.fused_window, packed_result)
    if traits.fused_group is not None:
        return _fused_group(ctx, node, traits.fused_group, fn.func, packed_result)
    func = traits.fused_aggregate
    if func is None or any(type(arg) is not PathExpr for arg in node.args):
        return None
    series = _packed_series(ctx, node.args)
    if series is None:
        return None
    xff = ctx.get('xFilesFactor')
    result = reduce_rows(series, func, xff)
    if result is None:
        return None
    ctx['args'] = node.args
    name, tags = aggregate_name_tags(series, func)
    first = series[0]
    return [TimeSeries(name, first.start, first.end, first.step, result, xFilesFactor=xff,
                       tags=tags)]


def const_arguments(func: Any, node: Call) -> Optional[dict[str, Any]]:
    """The arguments ``func`` would get for ``node`` whose arguments after the first are
    literals, named and with defaults applied by ``func``'s own signature (so the
    argument order and defaults are written once, in the function); None when an
    argument is not a literal or they do not fit the signature."""
    if any(type(arg) is not Const for arg in node.args[1:]):
        return None
    try:
        bound = _signature(func).bind(None, None, *[arg.value for arg in node.args[1:]])
    except TypeError:
        return None
    bound.apply_defaults()
    return bound.arguments


@functools.cache
def _signature(func: Any) -> inspect.Signature:
    return inspect.signature(func)


def _fused_group(ctx: dict[str, Any], node: Call, form: tuple[str, str], func: Any,
                 packed_result: bool = False) -> Optional[list[TimeSeries]]:
    """groupByNode(path, node[, callback]) / groupByNodes(path, callback, *nodes) with a
    sum/average/max/min callback and integer nodes; ``form`` names the function's
    callback and node parameters."""
    from webapp.functions.grouping import _group_by
    if type(node.args[0]) is not PathExpr:
        return None
    arguments = const_arguments(func, node)
    if arguments is None:
        return None
    callback, nodes = arguments[form[0]], arguments[form[1]]
    nodes = nodes if type(nodes) is tuple else (nodes,)
    how = GROUP_CALLBACKS.get(callback) if type(callback) is str else None
    if how is None or not nodes or any(type(n) is not int for n in nodes):
        return None
    series = _packed_series(ctx, node.args[:1])
    if series is None:
        return None
    xff = ctx.get('xFilesFactor')
    groups = _group_by(series, nodes)
    if how in ('sum', 'average'):
        grouped = _group_sums(series, groups, how, xff, packed_result)
        if grouped is not None:
            ctx['args'] = node.args
            return grouped
    results = []
    for key, members in groups.items():
        values = reduce_rows(members, how, xff)
        if values is None:
            return None
        name, tags = aggregate_name_tags(members, how)
        first = members[0]
        result = TimeSeries(name, first.start, first.end, first.step, values,
                            xFilesFactor=xff, tags=tags)
        result.name = key
        results.append(result)
    ctx['args'] = node.args
    return results


def _group_sums(series: list[PackedSeries], groups: dict[str, list], how: str,
                xff: Optional[float], packed_result: bool) -> Optional[list[TimeSeries]]:
    """Sums or averages of every group at once: step k adds the k-th member of each
    group (0.0 for groups with fewer), so each group's members are added
    in order from 0 as ``reduce_rows`` and ``sum()`` add them (an empty slot adds 0.0,
    which changes nothing). Packed rows for the JSON writer, else value lists."""
    np = packed.np
    members = list(groups.values())
    sizes = np.array([len(group) for group in members]).reshape(-1, 1)
    direct = packed.sum_rows([s.packed for group in members for s in group],
                             [g for g, group in enumerate(members) for _ in group],
                             len(members), pysum.COMPENSATED)
    if direct is not None:       # summed while reading the files
        with np.errstate(all='ignore'):
            acc, ok = pysum.finish(np, *direct, how == 'average', sizes, xff)
        return _group_results(groups, acc, ok, how, xff, packed_result)
    arrays = packed.stack_rows([s.packed for s in series])
    if arrays is None:
        return None
    values, valid = arrays
    row_of = {id(s): i for i, s in enumerate(series)}
    width = max(map(len, members))
    index = np.zeros((len(members), width), dtype=np.intp)
    for g, group in enumerate(members):
        index[g, :len(group)] = [row_of[id(s)] for s in group]
    acc = np.zeros((len(members), values.shape[1]))
    comp = np.zeros_like(acc)
    count = np.zeros(acc.shape, dtype=np.int64)
    with np.errstate(all='ignore'):  # inf - inf is nan, as in Python
        for k in range(width):
            short = sizes[:, 0] <= k              # groups without a k-th member add 0.0
            rows, known = values[index[:, k]], valid[index[:, k]]
            if short.any():
                rows[short] = 0.0
                known[short] = False
            pysum.add_into(np, acc, comp, rows)
            count += known
        acc, ok = pysum.finish(np, acc, comp, count, how == 'average', sizes, xff)
    return _group_results(groups, acc, ok, how, xff, packed_result)


def _group_results(groups: dict[str, list], acc: Any, ok: Any, how: str,
                   xff: Optional[float], packed_result: bool) -> list[TimeSeries]:
    """The groups' series of sums/averages ``acc`` (None where not ``ok``)."""
    block = packed.Block.computed(acc, ok) if packed_result else None
    lists = None if packed_result else packed.value_lists(acc, ok)
    results: list[TimeSeries] = []
    for g, (key, group) in enumerate(groups.items()):
        name, tags = aggregate_name_tags(group, how)
        first = group[0]
        if block is not None:
            result: TimeSeries = PackedSeries(name, first.start, first.end, first.step,
                                              packed.PackedValues(block, g),
                                              xFilesFactor=xff, tags=tags)
        else:
            result = TimeSeries(name, first.start, first.end, first.step, lists[g],
                                xFilesFactor=xff, tags=tags)
        result.name = key
        results.append(result)
    return results


def _fused_window(ctx: dict[str, Any], node: Call, func: Any, fixed: Mapping[str, str],
                  packed_result: bool) -> Optional[list[TimeSeries]]:
    """movingAverage/movingSum/movingWindow(path, window[, func][, xFilesFactor]) with a
    sum or average window, on packed rows: the generic function's series, names, tags
    and floats (``webapp.functions.calculate.window_arrays``), without a Python list per
    series; the first argument is not evaluated for the request's range as a list."""
    from webapp.functions import calculate
    if type(node.args[0]) is not PathExpr:
        return None
    arguments = const_arguments(func, node)
    if arguments is None:
        return None
    arguments = {**fixed, **arguments}
    window, how, ratio = arguments['windowSize'], arguments['func'], arguments['xFilesFactor']
    average = calculate.ARRAY_WINDOWS.get(how) if type(how) is str else None
    if average is None or type(window) not in (int, str) or \
            (ratio is not None and (type(ratio) not in (int, float) or not 0 <= ratio <= 1)):
        return None
    path = node.args[0].path
    series = fetch_series(ctx, path, packed=True)
    if not series:
        return None
    try:
        preview = calculate.window_preview(series, window)
    except Exception:         # a bad interval: the generic path raises graphite-web's error
        return None
    wider_ctx = dict(ctx, startTime=ctx['startTime'] - timedelta(seconds=preview))
    wider = fetch_series(wider_ctx, path, packed=True)
    if not wider or any(not isinstance(s, PackedSeries) or s.packed is None for s in wider):
        return None
    tag = 'moving' + how.capitalize()
    groups: dict[tuple[int, int], list[int]] = {}
    for i, one in enumerate(wider):
        points = int(window) if type(window) is int else preview // one.step
        groups.setdefault((points, len(one.packed)), []).append(i)
    out: list[Optional[TimeSeries]] = [None] * len(wider)
    np = packed.np
    for (points, length), members in groups.items():
        if not 1 <= points <= calculate.MAX_ARRAY_WINDOW or length <= points:
            return None
        arrays = packed.stack_rows([wider[i].packed for i in members])
        if arrays is None:
            return None
        values, valid = arrays
        if np.isnan(values[valid]).any():
            return None          # a stored NaN: Python's NaN rules apply
        ratios = [ratio if ratio is not None else wider[i].xFilesFactor for i in members]
        result, ok = calculate.window_arrays(np, values, valid, points, ratios, average)
        block = packed.Block.computed(result, ok) if packed_result else None
        lists = None if packed_result else packed.value_lists(result, ok)
        for row, i in enumerate(members):
            one = wider[i]
            name = ('%s(%s,"%s")' if type(window) is str else '%s(%s,%s)') % (
                tag, one.name, window)
            one.tags[tag] = window
            start = one.start + preview
            if block is not None:
                out[i] = PackedSeries(name, start, one.end, one.step,
                                      packed.PackedValues(block, row), tags=one.tags,
                                      xFilesFactor=one.xFilesFactor)
            else:
                out[i] = TimeSeries(name, start, one.end, one.step, lists[row],
                                    tags=one.tags, xFilesFactor=one.xFilesFactor)
    ctx['args'] = node.args
    return out  # type: ignore[return-value]

