"""A CLUSTER_SERVERS entry: another graphite-web 1.1 compatible server asked over HTTP.

Requests are the ones graphite-web 1.1 sends to its cluster: ``/metrics/find/?local=1
&format=pickle`` for finds and ``/render/?format=pickle&local=1&noCache=1`` with every
pattern as a ``target`` for fetches, so either side can be graphite-web itself.
"""

from __future__ import annotations

import http.client
import logging
import socket
import threading
import time
from typing import Any, Optional
from urllib.parse import parse_qs, urlencode, urlsplit

from webapp.storage.nodes import Node, intervals_from_wire, safe_loads

log = logging.getLogger("webapp.remote")


class RemoteError(Exception):
    """A cluster server failed, timed out or answered something unusable."""


class RemoteFinder:
    """Finds and fetches on one cluster server; disabled for REMOTE_RETRY_DELAY after a failure."""

    local = False

    def __init__(self, host: str, settings: Any) -> None:
        if host.startswith('http://') or host.startswith('https://'):
            parsed = urlsplit(host)
        else:
            scheme = 'https' if settings.INTRACLUSTER_HTTPS else 'http'
            parsed = urlsplit(scheme + '://' + host)
        self.host = parsed.netloc
        self.name = parsed.netloc
        self.scheme = parsed.scheme
        self.prefix = parsed.path.rstrip('/')
        self.params = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        self.tags = not self.params.get('noTags')
        self.find_timeout = float(settings.FIND_TIMEOUT)
        self.fetch_timeout = float(settings.FETCH_TIMEOUT)
        self.retry_delay = float(settings.REMOTE_RETRY_DELAY)
        self.use_post = bool(settings.REMOTE_STORE_USE_POST)
        self.max_retries = max(1, int(settings.MAX_FETCH_RETRIES))
        self.last_failure = 0.0
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return '<RemoteFinder %s>' % self.host

    @property
    def disabled(self) -> bool:
        return time.monotonic() - self.last_failure < self.retry_delay

    def fail(self) -> None:
        self.last_failure = time.monotonic()

    def close(self) -> None:
        """Close the idle keep-alive connections; one still in use by a request is closed
        when that request ends (a finder dropped by SIGHUP keeps no socket open)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # --- HTTP ------------------------------------------------------------------------------
    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        with self._lock:
            if self._idle:
                conn = self._idle.pop()
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
                return conn
        cls = http.client.HTTPSConnection if self.scheme == 'https' else \
            http.client.HTTPConnection
        return cls(self.host, timeout=timeout)

    def request(self, path: str, fields: list[tuple[str, Any]], headers: Optional[dict] = None,
                timeout: float = 3.0) -> tuple[bytes, str]:
        """GET (or POST) ``path`` with ``fields``; (body, content type) of a 200 answer."""
        url = self.prefix + path
        body = urlencode(fields)
        hdrs = dict(headers or {})
        if self.use_post:
            method, target = 'POST', url
            hdrs['Content-Type'] = 'application/x-www-form-urlencoded'
            payload: Optional[bytes] = body.encode()
        else:
            method, target, payload = 'GET', url + '?' + body, None
        deadline = time.monotonic() + timeout
        for attempt in (0, 1):
            conn = self._connection(timeout)
            reused = conn.sock is not None
            try:
                conn.request(method, target, body=payload, headers=hdrs)
                response = conn.getresponse()
                data = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as err:
                conn.close()
                if reused and attempt == 0 and time.monotonic() < deadline:
                    continue
                self.fail()
                raise RemoteError('%s: %s' % (self.host, err)) from None
            except (OSError, http.client.HTTPException) as err:
                conn.close()
                self.fail()
                kind = 'timed out' if isinstance(err, socket.timeout) else str(err) or repr(err)
                raise RemoteError('%s: %s' % (self.host, kind)) from None
            with self._lock:
                keep = not response.will_close and not self._closed
                if keep:
                    self._idle.append(conn)
            if not keep:
                conn.close()
            if response.status != 200:
                self.fail()
                raise RemoteError('%s: HTTP %d from %s' % (self.host, response.status, path))
            self.last_failure = 0.0
            return data, response.getheader('Content-Type', '')
        raise RemoteError('%s: unreachable' % self.host)  # pragma: no cover

    def _decode(self, data: bytes, content_type: str, what: str) -> Any:
        if 'json' in content_type:
            import json
            try:
                return json.loads(data)
            except ValueError as err:
                self.fail()
                raise RemoteError('%s: bad %s answer: %s' % (self.host, what, err)) from None
        try:
            return safe_loads(data)
        except Exception as err:  # noqa: BLE001 - any unpickling problem is the host's fault
            self.fail()
            raise RemoteError('%s: bad %s answer: %s' % (self.host, what, err)) from None

    # --- finder API ------------------------------------------------------------------------
    def find_nodes(self, pattern: str, start: Optional[int] = None, end: Optional[int] = None,
                   headers: Optional[dict] = None) -> list[Node]:
        fields: list[tuple[str, Any]] = [('local', self.params.get('local', '1')),
                                         ('format', self.params.get('format', 'pickle')),
                                         ('query', pattern)]
        if start:
            fields.append(('from', int(start)))
        if end:
            fields.append(('until', int(end)))
        data, ctype = self.request('/metrics/find/', fields, headers, self.find_timeout)
        results = self._decode(data, ctype, 'find')
        nodes = []
        try:
            for info in results:
                path = info.get('path') or info.get('metric_path')
                is_leaf = bool(info.get('is_leaf') or info.get('isLeaf'))
                intervals = intervals_from_wire(info.get('intervals')) if is_leaf else []
                nodes.append(Node(str(path), is_leaf, local=False, intervals=intervals))
        except (AttributeError, TypeError, KeyError, IndexError) as err:
            self.fail()
            raise RemoteError('%s: bad find answer: %r' % (self.host, err)) from None
        return nodes

    def fetch(self, patterns: list[str], start: int, end: int, now: Optional[int],
              context: dict[str, Any]) -> list[dict[str, Any]]:
        fields: list[tuple[str, Any]] = [('format', self.params.get('format', 'pickle')),
                                         ('local', self.params.get('local', '1')),
                                         ('noCache', '1'), ('from', int(start)),
                                         ('until', int(end))]
        fields.extend(('target', p) for p in patterns)
        if now is not None:
            fields.append(('now', int(now)))
        headers = context.get('forwardHeaders')
        deadline = time.monotonic() + self.fetch_timeout
        for attempt in range(self.max_retries):
            try:
                data, ctype = self.request('/render/', fields, headers,
                                           max(0.05, deadline - time.monotonic()))
                break
            except RemoteError as err:
                if attempt + 1 >= self.max_retries or time.monotonic() >= deadline or \
                        'timed out' in str(err):
                    raise
                log.info("retrying fetch from %s after: %s", self.host, err)
        series = self._decode(data, ctype, 'render')
        try:
            return [{'pathExpression': s.get('pathExpression', s['name']), 'name': s['name'],
                     'path': s['name'],
                     'time_info': (int(s['start']), int(s['end']), int(s['step'])),
                     'values': list(s['values'])} for s in series]
        except (AttributeError, TypeError, KeyError, ValueError) as err:
            self.fail()
            raise RemoteError('%s: bad render answer: %r' % (self.host, err)) from None

    def get_index(self, context: dict[str, Any]) -> list[str]:
        data, ctype = self.request('/metrics/index.json',
                                   [('local', self.params.get('local', '1'))],
                                   context.get('forwardHeaders'), self.find_timeout)
        return list(self._decode(data, 'json', 'index'))

    def auto_complete_tags(self, exprs: list[str], tag_prefix: Optional[str], limit: int,
                           context: dict[str, Any]) -> list[str]:
        fields = [('tagPrefix', tag_prefix or ''), ('limit', str(limit)),
                  ('local', self.params.get('local', '1'))] + [('expr', e) for e in exprs]
        data, _ = self.request('/tags/autoComplete/tags', fields, context.get('forwardHeaders'),
                               self.find_timeout)
        return list(self._decode(data, 'json', 'autocomplete'))

    def auto_complete_values(self, exprs: list[str], tag: str, value_prefix: Optional[str],
                             limit: int, context: dict[str, Any]) -> list[str]:
        fields = [('tag', tag or ''), ('valuePrefix', value_prefix or ''), ('limit', str(limit)),
                  ('local', self.params.get('local', '1'))] + [('expr', e) for e in exprs]
        data, _ = self.request('/tags/autoComplete/values', fields,
                               context.get('forwardHeaders'), self.find_timeout)
        return list(self._decode(data, 'json', 'autocomplete'))
