"""``/render/local/``: drawing for a graphite-web 1.1 front end that delegates rendering.

A graphite-web front end with REMOTE_RENDERING and RENDERING_HOSTS POSTs the graph type, a
newline and a pickle of its graph options, whose ``data`` is a list of its own
``graphite.render.datalib.TimeSeries``; it expects a PNG back (graphite-web's
renderLocalView). Only those two graphite classes are let through the unpickler, loaded as
our own series.
"""

from __future__ import annotations

import logging
from typing import Any

from carbon.formats.unpickler import SafeUnpickler, safe_loads
from webapp.http import Request, Response, add_never_cache_headers, text_response
from webapp.render.series import Tags, TimeSeries

log = logging.getLogger('webapp.render')
GRAPH_TYPES = ('line', 'pie')


class DelegatedSeries(TimeSeries):
    """A graphite-web TimeSeries as pickled by the front end (its __dict__ as state)."""

    def __setstate__(self, state: dict) -> None:
        tags = state.pop('_TimeSeries__tags', None)
        self.__dict__.update(state)
        self.options = dict(state.get('options') or {})
        self.tags = dict(tags) if tags else {'name': self.name}


class DelegatedTags(Tags):
    """graphite-web's Tags (a UserDict): its ``data`` dict is the state."""

    def __setstate__(self, state: dict) -> None:
        self.update(state.get('data') or {})


class _GraphOptionsUnpickler(SafeUnpickler):
    """A front end's graph options: its series and tags classes, as ours."""

    allowed = {('graphite.render.datalib', 'TimeSeries'): DelegatedSeries,
               ('graphite.render.datalib', 'Tags'): DelegatedTags,
               ('builtins', 'list'): list, ('builtins', 'set'): set,
               ('builtins', 'object'): object}


def parse_delegated(body: bytes) -> tuple[str, dict[str, Any]]:
    """(graph type, graph options) of a /render/local/ body; ValueError when malformed."""
    graph_type, newline, pickled = body.partition(b'\n')
    kind = graph_type.strip().decode('ascii', 'replace')
    if not newline or kind not in GRAPH_TYPES:
        raise ValueError('unknown graph type %r' % kind)
    try:
        options = safe_loads(pickled, _GraphOptionsUnpickler)
    except Exception as err:
        raise ValueError('bad graph options pickle: %s' % err) from None
    if not isinstance(options, dict) or not isinstance(options.get('data', []), list):
        raise ValueError('graph options must be a dict with a data list')
    return kind, options


def render_local_view(request: Request, store: Any, settings: Any) -> Response:
    """Draw a delegated graph as a PNG (graphite-web answers 500 with no body detail when
    anything goes wrong; we name the reason in plain text)."""
    from webapp.graphs import render_graph
    from webapp.graphs.templates import apply_template, templates_path
    try:
        kind, options = parse_delegated(request.body)
        data = [s for s in options.pop('data', []) if isinstance(s, TimeSeries)]
        params = {k: v for k, v in options.items() if isinstance(k, str)}
        params['graphType'] = kind
        params = apply_template(params, templates_path(settings))
        image, _content_type = render_graph(data, params, 'png')
    except Exception as err:
        log.warning('delegated rendering failed: %s', err)
        return text_response('Delegated rendering failed: %s' % err, 500)
    response = Response(image, 'image/png')
    add_never_cache_headers(response)
    return response
