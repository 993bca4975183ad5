"""The WSGI application: graphite-web 1.1.10's HTTP API without Django.

``make_app(settings)`` wires the whisper finder, the carbonlink pool, the TagDB and
the cluster servers into a Store and returns a thread-safe WSGI callable. User errors
(bad target, unknown function, bad time) answer 400 with a plain-text message; hosts
that failed during a request are named in the X-Graphite-Failed-Hosts header.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Callable, Iterable, Optional

from carbon.config.errors import ConfigError
from webapp.functions import views as function_views
from webapp.metrics import views as metric_views
from webapp.cpu_gate import CpuGate
from webapp.events import views as event_views
from webapp.events.store import make_event_store
from webapp.functions.plugins import load_function_plugins
from webapp.http import HttpError, Request, Response, text_response
from webapp.limits import Budget, WriteGuard, is_write
from webapp.readahead import body_of
from webapp.render import views as render_views
from webapp.render.errors import InputError, InputParameterError, format_input_error
from webapp.render.local import render_local_view
from webapp.render.grammar import TargetSyntaxError
from webapp.settings import WEBAPP_VERSION, WebSettings, ignored_warning, load_settings
from webapp.storage.carbonlink import CarbonLinkPool
from webapp.storage.store import FindLimitError, Store, make_remotes
from webapp.storage.whisper_finder import WhisperFinder
from webapp.tags import views as tag_views
from webapp.tags.tagdb import TagSpecError, make_tagdb

log = logging.getLogger("webapp")
View = Callable[..., Response]


def version_view(request: Request, store: Any, settings: Any) -> Response:
    """The version page: ``1.1.10`` (graphite-web's template adds a newline)."""
    return Response(WEBAPP_VERSION + '\n', 'text/html; charset=utf-8')


ROUTES: list[tuple[str, View]] = [
    (r'/render/local/?', render_local_view),
    (r'/render/?', render_views.render_view),
    (r'/metrics/index\.json', metric_views.index_view),
    (r'/metrics/find/?', metric_views.find_view),
    (r'/metrics/expand/?', metric_views.expand_view),
    (r'/metrics/?', metric_views.find_view),
    (r'/tags/tagSeries', tag_views.tag_series),
    (r'/tags/tagMultiSeries', tag_views.tag_multi_series),
    (r'/tags/delSeries', tag_views.del_series),
    (r'/tags/findSeries', tag_views.find_series),
    (r'/tags/autoComplete/tags', tag_views.auto_complete_tags),
    (r'/tags/autoComplete/values', tag_views.auto_complete_values),
    (r'/tags/(.+)', tag_views.tag_details),
    (r'/tags/?', tag_views.tag_list),
    (r'/functions/(.+)', function_views.function_details),
    (r'/functions/?', function_views.function_list),
    (r'/version/?', version_view),
    (r'/events/get_data?', event_views.get_data_view),
    (r'/events/(\d+)/?', event_views.detail_view),
    (r'/events/?', event_views.events_view),
]
_COMPILED = [(re.compile('^' + pattern + '$'), view) for pattern, view in ROUTES]
# what SIGHUP re-reads from the settings file; every other key keeps its start-up value
RELOADABLE = ('CLUSTER_SERVERS', 'REMOTE_EXCLUDE_LOCAL')
_USER_ERRORS = (InputError, InputParameterError, TargetSyntaxError, TagSpecError,
                FindLimitError)


class GraphiteApp:
    """A WSGI callable answering graphite-web's render, metrics, tags, events and functions
    API."""

    def __init__(self, settings: WebSettings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.gate = CpuGate(int(settings.get('CPU_SLOTS', 1)))
        store.gate = self.gate
        # a local finder without carbonlink (CARBONLINK_HOSTS empty, a plugin finder)
        carbonlink = getattr(store.local_finder, 'carbonlink', None)
        if carbonlink is not None:
            carbonlink.gate = self.gate
        self.prefix = '/' + settings.URL_PREFIX.strip('/') if settings.URL_PREFIX.strip('/') \
            else ''
        self.user_errors = _USER_ERRORS
        self.write_guard = WriteGuard(settings)

    def reload_settings(self, path: Optional[str]) -> list[str]:
        """SIGHUP: re-read ``path`` and apply the RELOADABLE keys (the cluster servers) to
        the running Store; returns the lines logged, one per changed value. A file that no
        longer loads keeps every running setting and says why."""
        try:
            fresh = load_settings(path)
        except ConfigError as err:
            line = "SIGHUP: kept the running settings: %s" % err
            log.error(line)
            return [line]
        lines = []
        for key in RELOADABLE:
            old, new = self.settings[key], fresh[key]
            if old != new:
                self.settings[key] = new
                lines.append("SIGHUP: %s changed from %s to %s" % (key, old, new))
        if lines:
            # one assignment: a request iterates the list it read, old or new
            old_remotes = self.store.remotes
            self.store.remotes = make_remotes(self.settings, old_remotes)
            kept = {id(finder) for finder in self.store.remotes}
            for finder in old_remotes:
                if id(finder) not in kept:
                    finder.close()
        for line in lines:
            log.info(line)
        return lines

    def close(self) -> None:
        """Release worker threads, sockets and the TagDB."""
        self.store.close()
        for finder in self.store.remotes:
            finder.close()
        # a local finder without carbonlink (CARBONLINK_HOSTS empty, a plugin finder)
        carbonlink = getattr(self.store.local_finder, 'carbonlink', None)
        if carbonlink is not None:
            carbonlink.close()
        if self.store.tagdb is not None:
            self.store.tagdb.close()
        if self.store.events is not None:
            self.store.events.close()

    def __call__(self, environ: dict[str, Any],
                 start_response: Callable[..., Any]) -> Iterable[bytes]:
        head = environ.get('REQUEST_METHOD') == 'HEAD'
        with self.gate.held():
            response = self.handle(environ)
            if head:
                response.complete()   # HEAD answers the whole body's Content-Length
        length = response.content_length
        headers = response.headers if length is None else \
            response.headers + [('Content-Length', str(length))]
        start_response(response.status_line(), headers)
        if head:
            return [b'']
        streamed = body_of(response, self.gate, environ.get('PATH_INFO', ''))
        return response.chunks if streamed is None else streamed

    def handle(self, environ: dict[str, Any]) -> Response:
        """The response to one request; never raises."""
        request: Optional[Request] = None
        try:
            request = Request(environ, self.prefix, int(self.settings.MAX_REQUEST_BYTES))
            view, args = self.resolve(request.path)
            if view is None:
                return text_response('Not Found: %s' % request.path, 404)
            if self.write_guard.enabled and is_write(request):
                self.write_guard.check(request)
            request.environ['webapp.budget'] = Budget(self.settings)
            request.environ['webapp.forward'] = self._forward_headers(request)
            response = view(request, self.store, self.settings, *args)
        except HttpError as err:
            response = text_response(str(err), err.status)
        except self.user_errors as err:
            targets = request.params.getlist('target') or request.params.getlist('target[]') \
                if request is not None else []
            log.info("bad request %s: %s", environ.get('PATH_INFO'), err)
            response = text_response(format_input_error(err, targets), 400)
        except RecursionError:
            response = text_response('Invalid parameters (target nested too deeply)', 400)
        except Exception as err:  # noqa: BLE001 - answer text, never an HTML page
            log.exception("error answering %s?%s", environ.get('PATH_INFO'),
                          environ.get('QUERY_STRING'))
            response = text_response('Internal error: %s: %s' % (type(err).__name__, err), 500)
        context = environ.get('webapp.context')
        if context and context.get('failedHosts'):
            hosts = list(dict.fromkeys(context['failedHosts']))
            response[self.settings.FAILED_HOSTS_HEADER] = ', '.join(hosts)
        return response

    @staticmethod
    def resolve(path: str) -> tuple[Optional[View], tuple]:
        for pattern, view in _COMPILED:
            m = pattern.match(path)
            if m:
                return view, m.groups()
        return None, ()

    def _forward_headers(self, request: Request) -> dict[str, str]:
        out = {}
        for name in self.settings.REMOTE_STORE_FORWARD_HEADERS:
            value = request.header(name)
            if value is not None:
                out[name] = value
        return out


def make_app(settings: WebSettings, store: Optional[Store] = None) -> GraphiteApp:
    """The WSGI application for ``settings`` (a Store is built unless one is given).

    Logs one warning naming graphite-web settings given but not used, and registers the
    FUNCTION_PLUGINS render functions.
    """
    warning = ignored_warning(settings)
    if warning:
        log.warning(warning)
    if settings.get("FUNCTION_PLUGINS"):
        added = load_function_plugins(settings.FUNCTION_PLUGINS)
        log.info("FUNCTION_PLUGINS: added %s", ", ".join(added) or "nothing")
    if store is None:
        carbonlink = CarbonLinkPool.from_settings(settings) if settings.CARBONLINK_HOSTS \
            else None
        finder = WhisperFinder(settings.WHISPER_DIR, carbonlink,
                               max_entries=settings.FIND_MAX_ENTRIES)
        store = Store(settings, finder, make_tagdb(settings), events=make_event_store(settings))
    return GraphiteApp(settings, store)
