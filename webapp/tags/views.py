"""/tags endpoints with graphite-web 1.1.10's JSON answers and error shapes."""

from __future__ import annotations

import json
import logging
from typing import Any, Callable

from webapp.http import Request, Response

log = logging.getLogger("webapp.tags")
JsonView = Callable[[Request, Any, Any], Any]


class JsonError(Exception):
    """Answered as ``{"error": message}`` with ``status``."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def json_view(func: JsonView) -> Callable[[Request, Any, Any], Response]:
    """graphite-web's @jsonResponse: JSON body; errors as {"error": ...} (400 for ValueError)."""
    def wrapped(request: Request, store: Any, settings: Any, *args: Any) -> Response:
        pretty = bool(request.params.get('pretty'))
        try:
            data = func(request, store, settings, *args)
            if isinstance(data, Response):
                return data
            status = 200
        except JsonError as err:
            data, status = {'error': str(err)}, err.status
        except ValueError as err:
            data, status = {'error': str(err)}, 400
        except Exception as err:  # noqa: BLE001 - graphite-web answers JSON 500s too
            log.exception("error in %s", func.__name__)
            data, status = {'error': str(err)}, 500
        text = json.dumps(data, indent=2 if pretty else None, sort_keys=pretty)
        return Response(text, 'application/json', status)
    wrapped.__name__ = func.__name__
    wrapped.__doc__ = func.__doc__
    return wrapped


def _tagdb(store: Any) -> Any:
    if store.tagdb is None:
        raise NotImplementedError('Tagging not implemented with DummyTagDB')
    return store.tagdb


def _context(request: Request) -> dict[str, Any]:
    context = {'forwardHeaders': request.environ.get('webapp.forward', {}),
               'localOnly': request.params.get('local') == '1', 'failedHosts': []}
    request.environ['webapp.context'] = context
    return context


def _list_param(request: Request, name: str) -> list[str]:
    return request.params.getlist(name) or request.params.getlist(name + '[]')


@json_view
def tag_series(request: Request, store: Any, settings: Any) -> Any:
    if request.method != 'POST':
        return Response(b'', status=405)
    path = request.params.get('path')
    if not path:
        raise JsonError('no path specified', 400)
    return _tagdb(store).tag_series(path)


@json_view
def tag_multi_series(request: Request, store: Any, settings: Any) -> Any:
    if request.method != 'POST':
        return Response(b'', status=405)
    paths = _list_param(request, 'path')
    if not paths:
        raise JsonError('no paths specified', 400)
    return _tagdb(store).tag_multi_series(paths)


@json_view
def del_series(request: Request, store: Any, settings: Any) -> Any:
    if request.method != 'POST':
        return Response(b'', status=405)
    paths = _list_param(request, 'path')
    if not paths:
        raise JsonError('no path specified', 400)
    return _tagdb(store).del_multi_series(paths)


@json_view
def find_series(request: Request, store: Any, settings: Any) -> Any:
    if request.method not in ('GET', 'POST'):
        return Response(b'', status=405)
    exprs = _list_param(request, 'expr')
    if not exprs:
        raise JsonError('no tag expressions specified', 400)
    if store.tagdb is None:
        return []
    return store.tagdb.find_series(exprs)


@json_view
def tag_list(request: Request, store: Any, settings: Any) -> Any:
    if request.method != 'GET':
        return Response(b'', status=405)
    if store.tagdb is None:
        return []
    return store.tagdb.list_tags(tagFilter=request.GET.get('filter'),
                                 limit=request.GET.get('limit'))


@json_view
def tag_details(request: Request, store: Any, settings: Any, tag: str) -> Any:
    if request.method != 'GET':
        return Response(b'', status=405)
    if store.tagdb is None:
        return None
    return store.tagdb.get_tag(tag, valueFilter=request.params.get('filter'),
                               limit=request.params.get('limit'))


@json_view
def auto_complete_tags(request: Request, store: Any, settings: Any) -> Any:
    if request.method not in ('GET', 'POST'):
        return Response(b'', status=405)
    return store.auto_complete_tags(_list_param(request, 'expr'),
                                    request.params.get('tagPrefix'),
                                    request.params.get('limit'), _context(request))


@json_view
def auto_complete_values(request: Request, store: Any, settings: Any) -> Any:
    if request.method not in ('GET', 'POST'):
        return Response(b'', status=405)
    tag = request.params.get('tag')
    if not tag:
        raise JsonError('no tag specified', 400)
    return store.auto_complete_values(_list_param(request, 'expr'), tag,
                                      request.params.get('valuePrefix'),
                                      request.params.get('limit'), _context(request))
