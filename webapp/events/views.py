"""/events endpoints with graphite-web 1.1.10's answers and status codes.

* ``/events/``: GET lists events as HTML (JSON when ``Accept`` is exactly
  ``application/json``), POST stores one from a JSON body, other methods 405.
* ``/events/<id>/``: the event as HTML, or as JSON for ``Accept: application/json``;
  DELETE removes it (not in graphite-web, which deletes through Django's admin).
* ``/events/get_data``: the events of ``from``/``until``/``tags``/``set`` as JSON
  (``jsonp`` wraps it), the shape Grafana's Graphite annotations read.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, Optional

from webapp.events import pages
from webapp.events.store import Event, EventStore
from webapp.http import Request, Response, text_response
from webapp.render.attime import get_timezone, parse_at_time

log = logging.getLogger("webapp.events")
_MAX_ID = 2 ** 63 - 1
TAGS_ERROR = '"tags" must be an array or space-separated string'
NOT_FOUND = 'Event matching query does not exist'


class EventInputError(ValueError):
    """Input graphite-web fails on; answered with its status (500 unless said)."""

    def __init__(self, message: str, status: int = 500) -> None:
        super().__init__(message)
        self.status = status


def _events(store: Any) -> EventStore:
    return store.events


def _wants_json(request: Request) -> bool:
    return request.header('Accept') == 'application/json'


def fetch(request: Request, store: Any, settings: Any) -> list[Event]:
    """The events selected by the query string (graphite-web's ``fetch``)."""
    q = request.GET
    tz = get_timezone(settings.TIME_ZONE)
    now = datetime.now(tz)
    try:
        start = parse_at_time(q['from'], tz, now) if q.get('from') is not None \
            else datetime.fromtimestamp(0, UTC)
        end = parse_at_time(q['until'], tz, now) if q.get('until') is not None else now
    except (ValueError, OverflowError) as err:
        raise EventInputError('Invalid time: %s' % err) from None
    tags = q.get('tags')
    if tags is None and q.get('set') == 'intersection':   # graphite-web fails here too
        raise EventInputError('set=intersection needs tags')
    return _events(store).find(start, end, tags.split(' ') if tags is not None else None,
                               q.get('set'))


def _dumps(data: Any) -> str:
    return json.dumps(data)


def _event_fields(event: dict[str, Any]) -> tuple[str, str, str, datetime]:
    """(what, data, tags text, when) of a posted event, checked as graphite-web does."""
    tags = event.get('tags')
    if tags is None:
        tags = ''
    elif isinstance(tags, list):
        if not all(isinstance(t, str) for t in tags):
            raise EventInputError('"tags" array must hold strings')
        tags = ' '.join(tags)
    elif not isinstance(tags, str):
        raise EventInputError(TAGS_ERROR, 400)
    if 'when' in event:
        when = event['when']
        if not isinstance(when, (int, float)):
            raise EventInputError('"when" must be epoch seconds')
        try:
            when_dt = datetime.fromtimestamp(when, UTC)
        except (ValueError, OverflowError, OSError) as err:
            raise EventInputError('"when" out of range: %s' % err) from None
    else:
        when_dt = datetime.now(UTC)
    what, data = event.get('what'), event.get('data', '')
    if what is None:
        raise EventInputError('"what" is required')
    if data is None:
        raise EventInputError('"data" must not be null')
    # Django's CharField/TextField store str(value) for anything that is not text
    return (what if isinstance(what, str) else str(what),
            data if isinstance(data, str) else str(data), tags, when_dt)


def post_event(request: Request, store: Any, settings: Any) -> Response:
    """Store the event in the JSON body; empty 200 (400/500 on bad input as graphite-web)."""
    if request.method != 'POST':
        return Response(b'', status=405)
    try:
        event = json.loads(request.body)
    except ValueError as err:
        raise EventInputError('Invalid event: body is not JSON (%s)' % err) from None
    if not isinstance(event, dict):
        raise EventInputError('Invalid event: body must be a JSON object')
    what, data, tags, when = _event_fields(event)
    _events(store).create(what, data, tags, when)
    return Response(b'', status=200)


def _answer_errors(view: Any) -> Any:
    """Turn EventInputError into graphite-web's status: JSON body for the tags check
    (400, as graphite-web), plain text otherwise (where graphite-web fails with 500)."""
    def wrapped(request: Request, store: Any, settings: Any, *args: Any) -> Response:
        try:
            return view(request, store, settings, *args)
        except EventInputError as err:
            log.info("bad events request %s: %s", request.path, err)
            if err.status == 400:
                return Response(_dumps({'error': str(err)}), status=400)
            return text_response(str(err), err.status)
    wrapped.__name__ = view.__name__
    wrapped.__doc__ = view.__doc__
    return wrapped


@_answer_errors
def events_view(request: Request, store: Any, settings: Any) -> Response:
    """/events/: GET lists (HTML, or JSON when asked), POST adds, others 405."""
    if request.method != 'GET':
        return post_event(request, store, settings)
    events = fetch(request, store, settings)
    if _wants_json(request):
        return Response(_dumps([e.as_dict() for e in events]), 'application/json')
    scheme = request.environ.get('wsgi.url_scheme', 'http')
    host = request.header('Host') or request.environ.get('SERVER_NAME', 'localhost')
    prefix = '/' + settings.URL_PREFIX.strip('/') if settings.URL_PREFIX.strip('/') else ''
    page = pages.list_page(events, get_timezone(settings.TIME_ZONE), prefix,
                           '%s://%s%s' % (scheme, host, prefix))
    return Response(page)


def _detail_json(event: Optional[Event], request: Request) -> Response:
    """graphite-web's jsonDetail: Django's model_to_dict with ISO ``when``."""
    if event is None:
        return Response(_dumps({'error': NOT_FOUND}), 'application/json', 404)
    when = event.when.isoformat()
    if event.when.microsecond:
        when = when[:23] + when[26:]
    if when.endswith('+00:00'):
        when = when[:-6] + 'Z'
    data = {'id': event.id, 'when': when, 'what': event.what, 'data': event.data,
            'tags': event.tags.split()}
    params = request.params if request.method in ('GET', 'POST') else None
    pretty = bool(params.get('pretty')) if params is not None else False
    return Response(json.dumps(data, indent=2 if pretty else None, sort_keys=pretty),
                    'application/json')


@_answer_errors
def detail_view(request: Request, store: Any, settings: Any, event_id: str) -> Response:
    """/events/<id>/: HTML or JSON (Accept: application/json); DELETE removes the event."""
    eid = int(event_id)
    events = _events(store)
    if request.method == 'DELETE':
        if eid <= _MAX_ID and events.delete(eid):
            return Response(b'', status=200)
        return Response(_dumps({'error': NOT_FOUND}), 'application/json', 404)
    event = events.get(eid) if eid <= _MAX_ID else None
    if _wants_json(request):
        return _detail_json(event, request)
    if event is None:
        return Response(pages.not_found_page(), 'text/html', 404)
    return Response(pages.detail_page(event, get_timezone(settings.TIME_ZONE)))


@_answer_errors
def get_data_view(request: Request, store: Any, settings: Any) -> Response:
    """/events/get_data: JSON list of {when, what, data, tags, id}; ``jsonp`` wraps it."""
    body = _dumps([e.as_dict() for e in fetch(request, store, settings)])
    if 'jsonp' in request.params:
        return Response('%s(%s)' % (request.params.get('jsonp'), body), 'text/javascript')
    return Response(body, 'application/json')
