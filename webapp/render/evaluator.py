"""Evaluating targets: prefetch every path once, then call the render functions.

Follows graphite-web 1.1.10's evaluator: all path expressions (and ``seriesByTag``
calls) of the request are fetched in one Store round (one carbonlink query per cache,
remote hosts in parallel), then the tree is evaluated bottom-up with
``fn.func(requestContext, *args, **kwargs)``. ``requestContext['evaluateTarget']`` and
``['fetchSeries']`` let functions fetch other ranges or targets.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime
from typing import Any, Optional, Union

from webapp.plugins import RENDER_FUNCTIONS
from webapp.render.errors import INPUT_ERRORS, InputError
from webapp.render.fetch import fetch_series, prefetch
from webapp.render.fused import fused_aggregate
from webapp.render.grammar import Call, Const, Node, PathExpr, Template, parse_target
from webapp.render.series import TimeSeries, materialize_all

log = logging.getLogger("webapp.render")
_NUMERIC = re.compile(r'^-?[\d.]+$')


def make_context(store: Any, settings: Any, start: datetime, end: datetime, now: datetime,
                 tzinfo: Any, **extra: Any) -> dict[str, Any]:
    """A requestContext with graphite-web's keys plus evaluateTarget/fetchSeries callables."""
    ctx: dict[str, Any] = {
        'startTime': start, 'endTime': end, 'now': now, 'localOnly': False, 'template': {},
        'tzinfo': tzinfo, 'forwardHeaders': {}, 'sourceIdHeaders': {}, 'data': [],
        'prefetched': {}, 'xFilesFactor': float(settings.DEFAULT_XFILES_FACTOR),
        'maxDataPoints': None, 'targets': [], 'maxStep': None, 'args': [],
        'failedHosts': [], 'store': store, 'settings': settings,
        'evaluateTarget': evaluate_target, 'fetchSeries': fetch_series,
    }
    # a store without events (a test's, remote-only)
    events = getattr(store, 'events', None)
    if events is not None:
        ctx['findEvents'] = events.event_times
    ctx.update(extra)
    return ctx


def _as_node(target: Union[str, Node]) -> Optional[Node]:
    if isinstance(target, Node):
        return target
    if not target or not str(target).strip():
        return None
    return parse_target(str(target))


def evaluate_target(ctx: dict[str, Any], targets: Any,
                    packed: bool = False) -> list[TimeSeries]:
    """Series of one target or a list of targets (strings or syntax nodes).

    With ``packed``, bare path targets (and targets that only rename or pick the series
    of one path, see ``_keeps_values``) may come back as unmaterialised PackedSeries (for
    a caller that handles them, i.e. the JSON writer).
    """
    if not isinstance(targets, list):
        targets = [targets]
    nodes = [n for n in (_as_node(t) for t in targets) if n is not None]
    prefetch(ctx, extract_path_expressions(ctx, nodes))
    series_list: list[TimeSeries] = []
    budget = ctx.get('budget')
    for node in nodes:
        if budget is not None:
            budget.check_time()
        if packed and isinstance(node, PathExpr):
            series_list.extend(fetch_series(ctx, node.path, packed=True))
            continue
        if packed and isinstance(node, Call):
            result = _evaluate_call(ctx, node, None, packed_first=_keeps_values(node),
                                    packed_result=True)
        else:
            result = evaluate_tokens(ctx, node)
        if isinstance(result, TimeSeries):
            series_list.append(result)
        elif isinstance(result, list):
            series_list.extend(result)
        elif result is not None:
            raise InputError('target %r is not a series expression' % str(node))
    return series_list


def _template_args(ctx: dict[str, Any], node: Template) -> dict[str, Any]:
    arglist: dict[str, Any] = {}
    arglist.update({name: value.value for name, value in node.kwargs})
    arglist.update({str(i + 1): value.value for i, value in enumerate(node.args)})
    arglist.update(ctx.get('template') or {})
    return arglist


def extract_path_expressions(ctx: dict[str, Any], nodes: list[Node]) -> list[str]:
    """Unique path expressions (and seriesByTag call texts) the targets will fetch."""
    found: set[str] = set()

    def walk(node: Node, replacements: Optional[dict[str, Any]]) -> None:
        if isinstance(node, Template):
            walk(node.expr, _template_args(ctx, node))
        elif isinstance(node, PathExpr):
            expression = node.path
            for name, value in (replacements or {}).items():
                if expression != '$' + name:
                    expression = expression.replace('$' + name, str(value))
            found.add(expression)
        elif isinstance(node, Call):
            if node.name == 'seriesByTag':
                found.add(node.raw)
            else:
                for arg in node.args:
                    walk(arg, replacements)
                for _, arg in node.kwargs:
                    walk(arg, replacements)

    for node in nodes:
        walk(node, None)
    return sorted(found)


def evaluate_tokens(ctx: dict[str, Any], node: Node,
                    replacements: Optional[dict[str, Any]] = None) -> Any:
    """Value of one syntax node: series list for paths and calls, Python value for literals."""
    if isinstance(node, Template):
        return evaluate_tokens(ctx, node.expr, _template_args(ctx, node))
    if isinstance(node, PathExpr):
        expression = node.path
        if replacements:
            for name in replacements:
                if expression == '$' + name:
                    value = replacements[name]
                    if not isinstance(value, str):
                        return value
                    if _NUMERIC.match(value):
                        try:
                            return float(value)
                        except ValueError:
                            return value
                    return value
                expression = expression.replace('$' + name, str(replacements[name]))
        return fetch_series(ctx, expression)
    if isinstance(node, Const):
        return node.value
    if isinstance(node, Call):
        return _evaluate_call(ctx, node, replacements)
    raise InputError('cannot evaluate %r' % (node,))


def _keeps_values(node: Node) -> bool:
    """Whether ``node`` calls, on a bare path, a function that never reads values (it
    renames or picks series: alias, aliasByNode, limit...)."""
    if not isinstance(node, Call) or not _on_path(node):
        return False
    try:
        fn = RENDER_FUNCTIONS.get(node.name)
    except KeyError:
        return False
    return fn.traits.keeps_values


def _on_path(node: Call) -> bool:
    """Whether the call's first argument is a bare path."""
    return bool(node.args) and type(node.args[0]) is PathExpr


def _evaluate_call(ctx: dict[str, Any], node: Call, replacements: Optional[dict[str, Any]],
                   packed_first: bool = False, packed_result: bool = False) -> Any:
    """Value of a function call; with ``packed_first`` its first argument (a bare path)
    is given as PackedSeries (only for functions that never read values); with
    ``packed_result`` (a target's outermost call, for the JSON writer) a fused
    computation may answer unmaterialised PackedSeries."""
    budget = ctx.get('budget')
    if budget is not None:
        budget.check_time()
    if node.name == 'seriesByTag':
        return fetch_series(ctx, node.raw)
    try:
        fn = RENDER_FUNCTIONS.get(node.name)
    except KeyError:
        raise InputError('Received request for unknown function: %s' % node.name) from None
    if not replacements:
        fast = fused_aggregate(ctx, node, fn, packed_result)
        if fast is not None:
            return fast
    if not replacements and fn.traits.packed_input and _on_path(node):
        # the function takes packed rows (scale, derivative... see
        # webapp.functions.packed_rows); its result is lists below
        packed_first = True
    args = [fetch_series(ctx, arg.path, packed=True) if packed_first and i == 0 else
            evaluate_tokens(ctx, arg, replacements) for i, arg in enumerate(node.args)]
    kwargs = {name: evaluate_tokens(ctx, arg, replacements) for name, arg in node.kwargs}
    ctx['args'] = node.args
    invalid: Optional[Exception] = None
    try:
        args, kwargs = fn.validate(args, kwargs)
    except INPUT_ERRORS as err:
        if ctx['settings'].ENFORCE_INPUT_VALIDATION:
            raise
        log.info('Validation Error: %s (func %s)', err, node.name)
        invalid = err
    try:
        result = fn.func(ctx, *args, **kwargs)
    except Exception as err:
        if type(err).__name__ == 'NormalizeEmptyResultError':
            return []
        if invalid is not None and not isinstance(err, INPUT_ERRORS):
            # graphite-web would answer 500 here; the arguments were invalid, so say so
            raise InputError(str(invalid)) from err
        if isinstance(err, TypeError) and _is_call_error(err, fn.func):
            raise InputError('%s: %s' % (node.name, err)) from None
        raise
    if not packed_result and isinstance(result, list):
        # a function may answer packed rows; only the JSON writer takes them as they are
        materialize_all(result)
    return result


def _is_call_error(err: TypeError, func: Any) -> bool:
    """True when a TypeError comes from calling ``func`` with a wrong signature."""
    tb = err.__traceback__
    depth = 0
    while tb is not None:
        depth += 1
        tb = tb.tb_next
    # any callable (a functools.partial has no __name__)
    name = getattr(func, '__name__', '')
    return depth <= 1 and name in str(err)
