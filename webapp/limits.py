"""Bounded work per request: what one request may ask of the render app.

A hostile or careless request (a wildcard over millions of paths, ``from=-100y`` over
a 1-second archive, a 10 MB body, a client that never finishes sending) must get a
4xx or a bounded answer, never an out-of-memory, a crash or a stuck thread. Settings
(docs/webapp.md):

* ``MAX_REQUEST_BYTES``: request body (and form) size; bigger answers 413.
* ``RENDER_MAX_DATAPOINTS``: datapoints one render request may read, counted from
  each file's chosen archive before it is read; past it, 400.
* ``FIND_MAX_ENTRIES``: directory entries one find may look at; past it, 400.
* ``MAX_REQUEST_SECONDS``: evaluation time of one render request, checked between
  steps (file reads, targets, function calls, and before the answer is written);
  past it, 400.
* ``CLIENT_REQUEST_TIMEOUT``: seconds a client has to send a whole request (line,
  headers and body); past it, 408 and the connection is closed (``server``).
* ``WRITE_ALLOWED_ADDRESSES`` / ``WRITE_TOKEN``: who may call the endpoints that
  write (tagSeries, tagMultiSeries, delSeries, posting or deleting events). Both
  empty (the default, as graphite-web): anyone.
"""

from __future__ import annotations

import hmac
import ipaddress
import time
from typing import Any, Callable

from webapp.http import HttpError, Request


class LimitError(HttpError):
    """A request asked for more work than a limit allows (400 unless said otherwise)."""


class Budget:
    """What one request has left: datapoints to read and time to run."""

    def __init__(self, settings: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_points = float(settings.get('RENDER_MAX_DATAPOINTS', float('inf')))
        self.max_seconds = float(settings.get('MAX_REQUEST_SECONDS', float('inf')))
        self.clock = clock
        self.started = clock()
        self.points = 0

    def spend_points(self, count: int, what: str) -> None:
        """Account ``count`` datapoints about to be read for ``what``."""
        self.points += count
        if self.points > self.max_points:
            raise LimitError('Invalid parameters (the request would read more than '
                             'RENDER_MAX_DATAPOINTS = %d datapoints, at %s; ask for fewer '
                             'series, a shorter range or a coarser archive)'
                             % (self.max_points, what))

    def check_time(self) -> None:
        if self.clock() - self.started > self.max_seconds:
            raise LimitError('Invalid parameters (the request ran longer than '
                             'MAX_REQUEST_SECONDS = %g s)' % self.max_seconds)


WRITE_PATHS = ('/tags/tagSeries', '/tags/tagMultiSeries', '/tags/delSeries')


def is_write(request: Request) -> bool:
    """Does this request change stored tags or events?"""
    path = request.path.rstrip('/')
    if path in WRITE_PATHS:
        return True
    if path == '/events' and request.method == 'POST':
        return True
    return path.startswith('/events/') and request.method == 'DELETE'


class WriteGuard:
    """WRITE_ALLOWED_ADDRESSES (addresses or networks) and WRITE_TOKEN (``Authorization:
    Bearer <token>``); each one set must be satisfied."""

    def __init__(self, settings: Any) -> None:
        self.networks = [ipaddress.ip_network(str(n).strip(), strict=False)
                         for n in settings.get('WRITE_ALLOWED_ADDRESSES') or []]
        self.token = str(settings.get('WRITE_TOKEN') or '')

    @property
    def enabled(self) -> bool:
        return bool(self.networks or self.token)

    def check(self, request: Request) -> None:
        """HttpError 403 unless ``request`` may write."""
        if self.networks:
            try:
                address = ipaddress.ip_address(request.environ.get('REMOTE_ADDR') or '')
            except ValueError:
                address = None
            if address is None or not any(address in n for n in self.networks):
                raise HttpError('Forbidden: %s may not write (WRITE_ALLOWED_ADDRESSES)'
                                % (request.environ.get('REMOTE_ADDR') or 'this client'), 403)
        if self.token:
            given = request.header('Authorization', '') or ''
            scheme, _, value = given.partition(' ')
            if scheme.lower() != 'bearer' or not hmac.compare_digest(
                    value.strip().encode(), self.token.encode()):
                raise HttpError('Forbidden: writing needs the WRITE_TOKEN '
                                '(Authorization: Bearer <token>)', 403)
