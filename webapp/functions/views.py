"""/functions and /functions/NAME: graphite-web's function metadata JSON."""

from __future__ import annotations

import json
import threading
from typing import Any

from webapp.plugins import RENDER_FUNCTIONS
from webapp.functions.registry import PIE_FUNCTIONS, function_info
from webapp.http import Request, Response


class _InfinityEncoder(json.JSONEncoder):
    """graphite-web's jsonInfinityEncoder: Infinity written as 1e9999."""

    def encode(self, o: Any) -> str:
        return super().encode(o).replace('Infinity,', '1e9999,').replace('Infinity}', '1e9999}')

    def default(self, o: Any) -> Any:
        # graphite-web's JSON convention: objects that serialise themselves
        if hasattr(o, 'toJSON'):
            return o.toJSON()
        return o.__dict__


_cache: dict[str, dict[str, Any]] = {}
_lock = threading.Lock()


def _infos(kind: str) -> dict[str, dict[str, Any]]:
    """name -> function_info for every registered (render or pie) function; computed once."""
    with _lock:
        if kind in _cache:
            return _cache[kind]
    registry = PIE_FUNCTIONS if kind == 'pie' else RENDER_FUNCTIONS
    infos = {}
    for name in registry.names():
        info = function_info(registry.get(name))
        info['name'] = name
        infos[name] = info
    with _lock:
        _cache[kind] = infos
    return infos


def _answer(request: Request, data: Any, status: int = 200) -> Response:
    pretty = bool(request.params.get('pretty'))
    text = json.dumps(data, indent=2 if pretty else None, sort_keys=pretty, cls=_InfinityEncoder)
    jsonp = request.params.get('jsonp')
    if jsonp:
        return Response('%s(%s)' % (jsonp, text), 'text/javascript', status)
    return Response(text, 'application/json', status)


def function_list(request: Request, store: Any, settings: Any) -> Response:
    """All functions (``?grouped=1`` nests them by group, ``?group=X`` filters)."""
    if request.method != 'GET':
        return Response(b'', status=405)
    infos = _infos('pie' if request.params.get('type') == 'pie' else 'series')
    grouped = request.params.get('grouped', '').lower() in ('1', 'true')
    group = request.params.get('group')
    result: dict[str, Any] = {}
    for name, info in infos.items():
        if group is not None and group != info['group']:
            continue
        if grouped:
            result.setdefault(info['group'], {})[name] = info
        else:
            result[name] = info
    return _answer(request, result)


def function_details(request: Request, store: Any, settings: Any, name: str) -> Response:
    """One function's metadata; 404 ``{"error": "Function not found: NAME"}`` otherwise."""
    if request.method != 'GET':
        return Response(b'', status=405)
    infos = _infos('pie' if request.params.get('type') == 'pie' else 'series')
    if name not in infos:
        return _answer(request, {'error': 'Function not found: %s' % name}, 404)
    return _answer(request, infos[name])
