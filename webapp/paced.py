"""Twisted's WSGI container with the body written at the pace the client reads it.

``twisted.web.wsgi`` hands every chunk of a response to the connection as soon as the
application yields it, and the connection joins what it has queued into one bytes
object before sending: a 48 MB format=json body briefly costs another 48 MB. Here the
worker thread, once a response has written more than ``QUEUED_LIMIT`` bytes, waits
after each chunk until the connection has less than that left to send (bounded by
``DRAIN_SECONDS``, so a client that stops reading cannot hold the thread forever), so
at most about one chunk plus ``QUEUED_LIMIT`` bytes are queued at a time.
"""

from __future__ import annotations

import time
from typing import Any

from twisted.internet.threads import blockingCallFromThread
from twisted.web.server import NOT_DONE_YET
from twisted.web.wsgi import WSGIResource, _WSGIResponse

QUEUED_LIMIT = 4 << 20
DRAIN_SECONDS = 60.0
POLL_SECONDS = 0.002


def queued_bytes(request: Any) -> int:
    """Bytes the request's connection still has to send (0 once it is gone)."""
    # Twisted's request and transport internals (gone once the connection closes)
    channel = getattr(request, 'channel', None)
    transport = getattr(channel, 'transport', None)
    if transport is None:
        return 0
    buffer = getattr(transport, 'dataBuffer', b'')
    return len(buffer) - getattr(transport, 'offset', 0) + getattr(transport, '_tempDataLen', 0)


class _PacedResponse(_WSGIResponse):
    """A WSGI response whose worker thread waits for large bodies to drain."""

    written = 0

    def write(self, data: bytes) -> None:
        super().write(data)
        self.written += len(data)
        if self.written <= QUEUED_LIMIT:
            return
        deadline = time.monotonic() + DRAIN_SECONDS
        while blockingCallFromThread(self.reactor, queued_bytes, self.request) > QUEUED_LIMIT \
                and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)


class PacedWSGIResource(WSGIResource):
    """``WSGIResource`` whose responses use :class:`_PacedResponse`."""

    def render(self, request: Any) -> Any:
        response = _PacedResponse(self._reactor, self._threadpool, self._application,
                                  request)
        response.start()
        return NOT_DONE_YET
