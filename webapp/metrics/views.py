"""/metrics/find, /metrics/expand and /metrics/index.json with graphite-web 1.1.10's shapes."""

from __future__ import annotations

import logging
import pickle
from datetime import datetime
from typing import Any
from urllib.parse import unquote_plus

from webapp.http import HttpError, Request, Response, json_response_for, text_response
from webapp.render.attime import epoch, parse_at_time, request_timezone

log = logging.getLogger("webapp.metrics")
PICKLE_PROTOCOL = 2


def _int_param(params: Any, name: str, default: int) -> int:
    if name not in params:
        return default
    try:
        return int(params[name])
    except ValueError as err:
        raise HttpError('Invalid parameters (Invalid int value %r for param %s: %s)'
                        % (params[name], name, err)) from None


def _time_param(params: Any, name: str, tz: Any, now: Any) -> Any:
    value = params[name]
    try:
        return int(epoch(parse_at_time(value, tz, now)))
    except (ValueError, OverflowError) as err:
        raise HttpError('Invalid parameters (Invalid value %r for param %s: %s)'
                        % (value, name, err)) from None


def _context(request: Request, local: bool) -> dict[str, Any]:
    return {'localOnly': local, 'forwardHeaders': request.environ.get('webapp.forward', {}),
            'failedHosts': []}


def find_view(request: Request, store: Any, settings: Any) -> Response:
    """Nodes matching ``query`` (formats treejson, completer, json, pickle, nodelist)."""
    q = request.params
    fmt = q.get('format', 'treejson')
    leaves_only = _int_param(q, 'leavesOnly', 0)
    local_only = _int_param(q, 'local', 0)
    wildcards = _int_param(q, 'wildcards', 0)
    tz = request_timezone(q, settings.TIME_ZONE)
    if 'now' in q:
        try:
            now = parse_at_time(q['now'], tz)
        except (ValueError, OverflowError) as err:
            raise HttpError('Invalid parameters (Invalid value %r for param now: %s)'
                            % (q['now'], err)) from None
    else:
        now = datetime.now(tz)
    from_time = _time_param(q, 'from', tz, now) if 'from' in q and q['from'] != '-1' else None
    until_time = _time_param(q, 'until', tz, now) if 'until' in q and q['until'] != '-1' \
        else None
    position = _int_param(q, 'position', -1)
    jsonp = q.get('jsonp', False)
    automatic_variants = _int_param(q, 'automatic_variants', 0)
    if 'query' not in q:
        raise HttpError("Invalid parameters (Missing required parameter 'query')")
    query = q['query']
    if query == '':
        raise HttpError("Invalid parameters (Required parameter 'query' is empty)")
    base_path = query.rsplit('.', 1)[0] + '.' if '.' in query else ''
    if fmt == 'completer':
        query = query.replace('..', '*.')
        if not query.endswith('*'):
            query += '*'
        if automatic_variants:
            parts = query.split('.')
            for i, part in enumerate(parts):
                if ',' in part and '{' not in part:
                    parts[i] = '{%s}' % part
            query = '.'.join(parts)
    context = _context(request, bool(local_only))
    request.environ['webapp.context'] = context
    matches = store.find(query, from_time, until_time, local=bool(local_only),
                         leaves_only=bool(leaves_only), context=context)
    matches.sort(key=lambda node: node.name)
    if fmt == 'treejson':
        response = json_response_for(request, tree_json(matches, base_path, bool(wildcards)),
                                     jsonp=jsonp)
    elif fmt == 'nodelist':
        response = json_response_for(request, nodes_by_position(matches, position), jsonp=jsonp)
    elif fmt == 'pickle':
        response = Response(pickle_nodes(matches), 'application/pickle')
    elif fmt == 'json':
        response = json_response_for(request, json_nodes(matches), jsonp=jsonp)
    elif fmt == 'completer':
        results = []
        for node in matches:
            info = {'path': node.path, 'name': node.name, 'is_leaf': str(int(node.is_leaf))}
            if not node.is_leaf:
                info['path'] += '.'
            results.append(info)
        if len(results) > 1 and wildcards:
            results.append({'name': '*'})
        response = json_response_for(request, {'metrics': results}, jsonp=jsonp)
    else:
        return text_response("Invalid value for 'format' parameter", 400)
    response['Pragma'] = 'no-cache'
    response['Cache-Control'] = 'no-cache'
    return response


def tree_json(nodes: list, base_path: str, wildcards: bool = False) -> list[dict[str, Any]]:
    """The browser tree format: wildcard node, then branches, then leaves."""
    branch = {'allowChildren': 1, 'expandable': 1, 'leaf': 0}
    leaf = {'allowChildren': 0, 'expandable': 0, 'leaf': 1}
    results: list[dict[str, Any]] = []
    if len(nodes) > 1 and wildcards:
        node = {'text': '*', 'id': base_path + '*'}
        node.update(branch if any(not n.is_leaf for n in nodes) else leaf)
        results.append(node)
    found = set()
    leaves, branches = [], []
    for n in nodes:
        if n.name in found:
            continue
        found.add(n.name)
        entry = {'text': unquote_plus(str(n.name)), 'id': base_path + str(n.name)}
        if n.is_leaf:
            entry.update(leaf)
            leaves.append(entry)
        else:
            entry.update(branch)
            branches.append(entry)
    return results + branches + leaves


def nodes_by_position(matches: list, position: int) -> dict[str, list[str]]:
    found = set()
    for node in matches:
        parts = node.path.split('.')
        try:
            found.add(parts[position])
        except IndexError:
            continue
    return {'nodes': sorted(found)}


def pickle_nodes(nodes: list) -> bytes:
    """Find results for graphite-web front ends (intervals as (start, end) pairs)."""
    infos = []
    for node in nodes:
        info: dict[str, Any] = {'path': node.path, 'is_leaf': node.is_leaf}
        if node.is_leaf:
            info['intervals'] = [tuple(i) for i in node.intervals]
        infos.append(info)
    return pickle.dumps(infos, protocol=PICKLE_PROTOCOL)


def json_nodes(nodes: list) -> list[dict[str, Any]]:
    infos = []
    for node in nodes:
        info: dict[str, Any] = {'path': node.path, 'is_leaf': node.is_leaf}
        if node.is_leaf:
            info['intervals'] = [{'start': s, 'end': e} for s, e in node.intervals]
        infos.append(info)
    return sorted(infos, key=lambda item: item['path'])


def expand_view(request: Request, store: Any, settings: Any) -> Response:
    """Every path matching each ``query`` (sorted union, or per query with groupByExpr=1)."""
    q = request.params
    local_only = _int_param(q, 'local', 0)
    group_by_expr = _int_param(q, 'groupByExpr', 0)
    leaves_only = _int_param(q, 'leavesOnly', 0)
    jsonp = q.get('jsonp', False)
    context = _context(request, bool(local_only))
    request.environ['webapp.context'] = context
    results: dict[str, set[str]] = {}
    for query in q.getlist('query'):
        results[query] = set()
        for node in store.find(query, local=bool(local_only), context=context):
            if node.is_leaf or not leaves_only:
                results[query].add(node.path)
    if group_by_expr:
        body: Any = {k: sorted(v) for k, v in results.items()}
    else:
        body = sorted(set().union(*results.values())) if results else []
    response = json_response_for(request, {'results': body}, jsonp=jsonp)
    response['Pragma'] = 'no-cache'
    response['Cache-Control'] = 'no-cache'
    return response


def index_view(request: Request, store: Any, settings: Any) -> Response:
    """Every leaf metric name, sorted (local=1 for this server only)."""
    q = request.params
    jsonp = q.get('jsonp', False)
    try:
        local = bool(int(q.get('local', 0)))
    except ValueError:
        local = False
    context = _context(request, local)
    request.environ['webapp.context'] = context
    try:
        matches = store.get_index(context)
    except Exception:  # noqa: BLE001 - graphite-web answers [] with status 500
        log.exception("index failed")
        return json_response_for(request, [], jsonp=jsonp, status=500)
    return json_response_for(request, matches, jsonp=jsonp)
