"""The /render endpoint: graphite-web 1.1.10's parameters and output formats."""

from __future__ import annotations

import csv
import io
import json
import math
import pickle
from datetime import datetime
from typing import Any

from webapp.http import (HttpError, Request, Response, add_never_cache_headers,
                         patch_response_headers, streamed_response)
from webapp.render.attime import parse_at_time, request_timezone
from webapp.render import jsonfmt, msgpackfmt
from webapp.render.evaluator import evaluate_target, make_context
from webapp.render.series import PackedSeries, materialize_all

GRAPH_OPTIONS = (
    'width', 'height', 'margin', 'bgcolor', 'fgcolor', 'fontName', 'fontSize', 'fontBold',
    'fontItalic', 'colorList', 'template', 'yAxisSide', 'outputFormat', 'title', 'vtitle',
    'lineMode', 'lineWidth', 'hideLegend', 'hideAxes', 'minXStep', 'hideGrid',
    'majorGridLineColor', 'minorGridLineColor', 'thickness', 'min', 'max', 'graphOnly', 'yMin',
    'yMax', 'yLimit', 'yStep', 'areaMode', 'areaAlpha', 'drawNullAsZero', 'tz', 'pieMode',
    'yUnitSystem', 'logBase', 'yMinLeft', 'yMinRight', 'yMaxLeft', 'yMaxRight', 'yLimitLeft',
    'yLimitRight', 'yStepLeft', 'yStepRight', 'rightWidth', 'rightColor', 'rightDashed',
    'leftWidth', 'leftColor', 'leftDashed', 'xFormat', 'minorY', 'hideYAxis', 'uniqueLegend',
    'vtitleRight', 'yDivisors', 'connectedLimit', 'hideXAxis', 'hideNullFromLegend',
    'valueLabels', 'valueLabelsMin', 'pieLabels', 'valueLabelsColor', 'legendMaxItems',
)
GRAPH_TYPES = ('line', 'pie')
AXIS_OPTIONS = ('min', 'max', 'yMin', 'yMax', 'yLimit', 'yStep', 'yMinLeft', 'yMaxLeft',
                'yLimitLeft', 'yStepLeft', 'yMinRight', 'yMaxRight', 'yLimitRight',
                'yStepRight', 'yDivisors', 'logBase')
PICKLE_PROTOCOL = 2


def _graph_value(opt: str, val: str) -> Any:
    """graphite-web's coercion of a graph option (int, float, bool or text)."""
    if (val.isdigit() or (val.startswith('-') and val[1:].isdigit())) and \
            'color' not in opt.lower():
        return int(val)
    if '.' in val and (val.replace('.', '', 1).isdigit() or
                       (val.startswith('-') and val[1:].replace('.', '', 1).isdigit())):
        return float(val)
    if val.lower() in ('true', 'false'):
        return val.lower() == 'true'
    return val


MAX_CACHE_TIMEOUT = 2 ** 31 - 1


def _number(q: Any, key: str, kind: type, default: Any, low: float = -math.inf,
            high: float = math.inf) -> Any:
    """``q[key]`` as ``kind`` (int or float) within low..high, else ``default`` when absent;
    ValueError naming the parameter otherwise (a 400)."""
    if key not in q:
        return default
    text = q[key]
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise ValueError("%s must be %s, got '%s'" % (
            key, 'an integer' if kind is int else 'a number', text)) from None
    if not low <= value <= high:
        raise ValueError("%s must be from %g to %g, got '%s'" % (key, low, high, text))
    return value


def _time(q: Any, key: str, tz: Any, now: Any) -> datetime:
    """``q[key]`` as a time (graphite-web's at-time syntax); ValueError naming ``key``."""
    try:
        return parse_at_time(q[key], tz, now)
    except (ValueError, OverflowError) as err:
        raise ValueError('%s: %s' % (key, err)) from None


def parse_options(request: Request, settings: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(graphOptions, requestOptions) as graphite-web's parseOptions; ValueError on bad input."""
    q = request.params
    graph: dict[str, Any] = {'width': 330, 'height': 250}
    opts: dict[str, Any] = {}
    graph_type = q.get('graphType', 'line')
    if graph_type not in GRAPH_TYPES:
        raise ValueError("Invalid graphType '%s', must be one of %s" % (graph_type,
                                                                      list(GRAPH_TYPES)))
    opts['graphType'] = graph_type
    opts['pieMode'] = q.get('pieMode', 'average')
    cache_timeout = _number(q, 'cacheTimeout', int, settings.DEFAULT_CACHE_DURATION,
                            -MAX_CACHE_TIMEOUT, MAX_CACHE_TIMEOUT)
    opts['targets'] = q.getlist('target') or q.getlist('target[]')
    opts['template'] = {k[9:-1]: v for k, v in q.items() if k.startswith('template[')}
    if 'pickle' in q:
        opts['format'] = 'pickle'
    if 'rawData' in q:
        opts['format'] = 'raw'
    if 'format' in q:
        opts['format'] = q['format']
        if 'jsonp' in q:
            opts['jsonp'] = q['jsonp']
    opts['pretty'] = bool(q.get('pretty'))
    if 'noCache' in q:
        opts['noCache'] = True
    if 'maxDataPoints' in q and q['maxDataPoints'].isdigit():
        opts['maxDataPoints'] = int(q['maxDataPoints'])
        if opts['maxDataPoints'] < 1:   # graphite-web divides by it (500)
            raise ValueError("maxDataPoints must be a positive integer, got '%s'"
                             % q['maxDataPoints'])
    if 'noNullPoints' in q:
        opts['noNullPoints'] = True
    if 'maxStep' in q and q['maxStep'].isdigit():
        opts['maxStep'] = int(q['maxStep'])
    opts['localOnly'] = q.get('local') == '1'
    fmt = opts.get('format')
    graph['outputFormat'] = fmt if fmt in ('svg', 'pdf') else 'png'
    for opt in GRAPH_OPTIONS:
        if opt in q:
            val = q[opt]
            if val.lower() == 'default' or val == '':
                continue
            graph[opt] = _graph_value(opt, val)
    graph['graphType'] = graph_type
    tz = request_timezone(q, settings.TIME_ZONE)
    opts['tzinfo'] = tz
    now = _time(q, 'now', tz, None) if 'now' in q else datetime.now(tz)
    until = _time(q, 'until', tz, now) if 'until' in q else now
    start = _time(q, 'from', tz, now) if 'from' in q else parse_at_time('-1d', tz, now)
    opts['startTime'], opts['endTime'] = min(start, until), max(start, until)
    if opts['startTime'] == opts['endTime']:
        raise ValueError('Invalid empty time range (from and until are both %s)'
                         % opts['startTime'].strftime('%Y-%m-%d %H:%M:%S %Z'))
    opts['now'] = now
    if cache_timeout == 0:
        opts['noCache'] = True
    opts['cacheTimeout'] = cache_timeout
    opts['xFilesFactor'] = _number(q, 'xFilesFactor', float,
                                   float(settings.DEFAULT_XFILES_FACTOR))
    return graph, opts


def render_view(request: Request, store: Any, settings: Any) -> Response:
    """Answer /render (GET or POST)."""
    try:
        graph, opts = parse_options(request, settings)
    except (ValueError, OverflowError) as err:
        raise HttpError('Invalid parameters (%s)' % err) from None
    ctx = make_context(store, settings, opts['startTime'], opts['endTime'], opts['now'],
                       opts['tzinfo'], localOnly=opts['localOnly'], template=opts['template'],
                       xFilesFactor=opts['xFilesFactor'], targets=opts['targets'],
                       maxDataPoints=opts.get('maxDataPoints'), maxStep=opts.get('maxStep'),
                       forwardHeaders=_forward_headers(request, settings),
                       budget=request.environ.get('webapp.budget'))
    request.environ['webapp.context'] = ctx
    data: list[Any] = ctx['data']
    response = None
    if opts['graphType'] == 'pie':
        data.extend(_pie_data(ctx, opts))
    else:
        fmt = opts.get('format')
        writer = FORMATS.get(fmt or '')
        # packed rows reach the JSON writer and the graphs (webapp.graphs.line merges a
        # graph's points from them), not the other writers
        data.extend(evaluate_target(ctx, opts['targets'],
                                    packed=fmt == 'json' or writer is None))
        if ctx.get('budget') is not None:    # the answer is written in one step
            ctx['budget'].check_time()
        if writer is not None:
            response = writer(opts, data)
    if response is None:
        response = _render_image(graph, opts, data, settings)
    if opts.get('noCache'):
        add_never_cache_headers(response)
    else:
        patch_response_headers(response, opts['cacheTimeout'])
    return response


def _forward_headers(request: Request, settings: Any) -> dict[str, str]:
    out = {}
    for name in settings.REMOTE_STORE_FORWARD_HEADERS:
        value = request.header(name)
        if value is not None:
            out[name] = value
    return out


def _pie_data(ctx: dict[str, Any], opts: dict[str, Any]) -> list[Any]:
    """Series for a pie chart: ``name:value`` targets become one-point series.

    The graph renderer reduces each series with ``pieMode`` (graphite-web's PieFunctions).
    """
    from webapp.plugins import PIE_FUNCTIONS
    from webapp.render.series import TimeSeries
    if opts['pieMode'] not in PIE_FUNCTIONS:
        raise HttpError("Invalid parameters (Invalid pieMode '%s', must be one of %s)"
                        % (opts['pieMode'], PIE_FUNCTIONS.names()))
    data: list[Any] = []
    for target in opts['targets']:
        if ':' in target:
            name, _, value = target.partition(':')
            try:
                number = float(value)
            except ValueError:
                raise HttpError("Invalid parameters (Invalid target '%s')" % target) from None
            data.append(TimeSeries(name, 0, 1, 1, [number]))
            continue
        data.extend(evaluate_target(ctx, target))
    return data


def _render_image(graph: dict[str, Any], opts: dict[str, Any], data: list,
                  settings: Any) -> Response:
    from webapp.graphs import render_graph
    from webapp.graphs.axis import AxisError
    from webapp.graphs.options import OptionError, check_options
    from webapp.graphs.templates import apply_template, templates_path
    fmt = graph.get('outputFormat', 'png')
    params = apply_template(graph, templates_path(settings))
    try:
        check_options(params)
        image, content_type = render_graph(data, params, fmt)
    except OptionError as err:
        raise HttpError('Invalid parameters (%s)' % err) from None
    except AxisError as err:  # e.g. a yMin above the yMax: name the y axis options given
        given = ['%s=%s' % (key, params[key]) for key in AXIS_OPTIONS if key in params]
        raise HttpError('Invalid parameters (%s%s)' % (err, '; ' + ', '.join(given)
                                                       if given else '')) from None
    if fmt == 'svg' and 'jsonp' in opts:
        text = image.decode('utf-8') if isinstance(image, bytes) else image
        return Response('%s(%s)' % (opts['jsonp'], json.dumps(text)), 'text/javascript')
    return Response(image, content_type)


# --- data formats -----------------------------------------------------------------------------
def _consolidate_for_json(opts: dict[str, Any], data: list) -> None:
    """graphite-web's maxDataPoints consolidation (including its start nudge)."""
    max_points = opts.get('maxDataPoints')
    if max_points is None or not data:
        return
    start = min(s.start for s in data)
    end = max(s.end for s in data)
    time_range = end - start
    for series in data:
        if max_points == 1:
            series.consolidate(_length(series))
            continue
        points = time_range / series.step
        if max_points < points:
            per_point = math.ceil(float(points) / float(max_points))
            seconds_per_point = int(per_point * series.step)
            nudge = seconds_per_point + (series.start % series.step) - \
                (series.start % seconds_per_point)
            series.start = series.start + nudge
            to_lose = int(nudge / series.step)
            if to_lose > 1:
                if isinstance(series, PackedSeries) and series.packed is not None:
                    series.drop += to_lose - 1
                else:
                    del series[0:to_lose - 1]
            series.consolidate(per_point)


def _length(series: Any) -> int:
    if isinstance(series, PackedSeries) and series.packed is not None:
        return max(0, len(series.packed) - series.drop)
    return len(series)


def _json_number(v: Any) -> str:
    if v is None:
        return 'null'
    if type(v) is float:
        if v != v:
            return 'null'
        if v in (math.inf, -math.inf):
            return '1e9999' if v > 0 else '-1e9999'
        return float.__repr__(v)
    if type(v) is int:
        return int.__repr__(v)
    if isinstance(v, float) and not math.isfinite(v):
        return 'null' if v != v else ('1e9999' if v > 0 else '-1e9999')
    return json.dumps(v)


def render_json(opts: dict[str, Any], data: list) -> Response:
    """format=json: [{"target", "tags", "datapoints": [[value, ts], ...]}, ...]."""
    if not any(_length(series) for series in data):
        data = []  # graphite-web's ``if any(data)``: only empty series -> []
    _consolidate_for_json(opts, data)
    no_nulls = 'noNullPoints' in opts
    if not no_nulls and not opts.get('pretty'):
        if 'jsonp' in opts:
            return streamed_response(jsonfmt.render_iter(data, opts['jsonp'] + '(', ')'),
                                     'text/javascript')
        return streamed_response(jsonfmt.render_iter(data), 'application/json')
    materialize_all(data)
    if opts.get('pretty'):
        out = []
        for series in data:
            points = [list(p) for p in series.datapoints()]
            if no_nulls:
                points = [p for p in points if p[0] is not None and
                          not (isinstance(p[0], float) and p[0] != p[0])]
                if not points:
                    continue
            out.append({'target': series.name, 'tags': dict(series.tags), 'datapoints': points})
        text = json.dumps(out, indent=2).replace('NaN,', 'null,').replace('Infinity,', '1e9999,')
    else:
        chunks = []
        for series in data:
            points = [p for p in series.datapoints()
                      if p[0] is not None and not (isinstance(p[0], float) and p[0] != p[0])]
            if not points:
                continue
            chunks.append(jsonfmt.header(series) + '[' + ', '.join(
                '[%s, %d]' % (_json_number(v), t) for v, t in points) + ']}')
        text = '[' + ', '.join(chunks) + ']'
    if 'jsonp' in opts:
        return Response('%s(%s)' % (opts['jsonp'], text), 'text/javascript')
    return Response(text, 'application/json')


def render_csv(opts: dict[str, Any], data: list) -> Response:
    """format=csv: ``name,YYYY-MM-DD HH:MM:SS,value`` rows in the request's time zone."""
    buf = io.StringIO()
    writer = csv.writer(buf, dialect='excel')
    tz = opts['tzinfo']
    for series in data:
        for i, value in enumerate(series):
            stamp = datetime.fromtimestamp(series.start + i * series.step, tz)
            writer.writerow((series.name, stamp.strftime('%Y-%m-%d %H:%M:%S'), value))
    return Response(buf.getvalue(), 'text/csv')


def render_raw(opts: dict[str, Any], data: list) -> Response:
    """format=raw: ``name,start,end,step|v1,v2,...`` per line."""
    lines = []
    for series in data:
        lines.append('%s,%d,%d,%d|%s\n' % (series.name, series.start, series.end, series.step,
                                           ','.join(map(repr, series))))
    return Response(''.join(lines), 'text/plain')


def _infos(data: list) -> list[dict[str, Any]]:
    """graphite-web's ``series.getInfo()`` of each series, values as plain Python numbers."""
    infos = []
    for series in data:
        info = series.getInfo()
        info['values'] = [None if v is None else (float(v) if not isinstance(v, (int, float))
                                                  else v) for v in info['values']]
        infos.append(info)
    return infos


def render_pickle(opts: dict[str, Any], data: list) -> Response:
    """format=pickle: a list of series dicts, as graphite-web front ends expect."""
    return Response(pickle.dumps(_infos(data), protocol=PICKLE_PROTOCOL), 'application/pickle')


def render_msgpack(opts: dict[str, Any], data: list) -> Response:
    """format=msgpack: the same dicts as format=pickle, MessagePack-encoded (graphite-web
    1.1's other remote-fetch format)."""
    return Response(msgpackfmt.dumps(_infos(data)), 'application/x-msgpack')


FORMATS = {'json': render_json, 'csv': render_csv, 'raw': render_raw, 'pickle': render_pickle,
           'msgpack': render_msgpack}
