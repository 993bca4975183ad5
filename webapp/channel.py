"""The HTTP channel of ``graphite-render``: clients must send a whole request in time.

Twisted's channel only has an idle timeout, which a client sending a byte now and then
never reaches, and it buffers any body it is sent. ``bounded_channel`` makes channels
that give each request ``seconds`` to arrive (line, headers and body; else 408 and the
connection is closed) and refuse one that announces or sends more than ``max_bytes``
of body (413), before the WSGI app sees it.
"""

from __future__ import annotations

from typing import Any

from twisted.web.http import HTTPChannel

_TIMEOUT = (b"HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain\r\n"
            b"Connection: close\r\nContent-Length: 35\r\n\r\n"
            b"request not received within timeout")
_TOO_LARGE = (b"HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: text/plain\r\n"
              b"Connection: close\r\nContent-Length: 22\r\n\r\nrequest body too large")
_URI_TOO_LONG = (b"HTTP/1.1 414 Request-URI Too Long\r\nContent-Type: text/plain\r\n"
                 b"Connection: close\r\nContent-Length: 31\r\n\r\nrequest line or header too long")
_BAD = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n"
        b"Connection: close\r\nContent-Length: 11\r\n\r\nbad request")
DISCARD_SECONDS = 5.0  # after a refusal, what the client still sends is read and dropped


class BoundedChannel(HTTPChannel):
    """An HTTPChannel with a per-request arrival deadline and a body size bound."""

    request_seconds = 30.0
    max_body = 2621440

    def connectionMade(self) -> None:  # noqa: N802
        super().connectionMade()
        self._arrival: Any = None
        self._received = 0
        self._refused = False
        self._discard: Any = None
        self._start_clock()

    def _start_clock(self) -> None:
        self._received = 0
        if self.request_seconds > 0:
            self._arrival = self.callLater(self.request_seconds, self._too_slow)

    def _stop_clock(self) -> None:
        if self._arrival is not None and self._arrival.active():
            self._arrival.cancel()
        self._arrival = None

    def _refuse(self, answer: bytes, discard: bool = True) -> None:
        """Answer and close. With ``discard``, the client's further bytes are read and
        dropped for a few seconds first (closing with unread input would reset the
        connection, and a client still sending would not see the answer)."""
        if self._refused:
            return
        self._refused = True
        self._stop_clock()
        self.transport.write(answer)
        # only half-closeable Twisted transports have it
        half_close = getattr(self.transport, 'loseWriteConnection', None)
        if discard and half_close is not None:
            half_close()
            self._discard = self.callLater(DISCARD_SECONDS, self.transport.abortConnection)
        else:
            self.transport.loseConnection()

    def lineLengthExceeded(self, line: bytes) -> None:  # noqa: N802
        self._refuse(_URI_TOO_LONG)

    def _respondToBadRequestAndDisconnect(self) -> None:  # noqa: N802
        self._refuse(_BAD)

    def _too_slow(self) -> None:
        self._arrival = None
        if not self._handlingRequest and not self._refused:
            self._refuse(_TIMEOUT, discard=False)

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        if self._refused:
            return
        if not self._handlingRequest:
            self._received += len(data)
            if self._received > self.max_body + self.totalHeadersSize:
                self._refuse(_TOO_LARGE)
                return
        super().dataReceived(data)

    def lineReceived(self, line: bytes) -> None:  # noqa: N802
        if not self._refused:
            super().lineReceived(line)

    def rawDataReceived(self, data: bytes) -> None:  # noqa: N802
        if not self._refused:
            super().rawDataReceived(data)

    def allHeadersReceived(self) -> None:  # noqa: N802
        if self.length is not None and self.length > self.max_body:
            self._refuse(_TOO_LARGE)
            return
        super().allHeadersReceived()

    def allContentReceived(self) -> None:  # noqa: N802
        self._stop_clock()
        super().allContentReceived()

    def requestDone(self, request: Any) -> None:  # noqa: N802
        super().requestDone(request)
        if self.persistent and not self._refused:
            self._start_clock()

    def connectionLost(self, reason: Any) -> None:  # noqa: N802
        self._stop_clock()
        if self._discard is not None and self._discard.active():
            self._discard.cancel()
        super().connectionLost(reason)


def bounded_channel(seconds: float, max_bytes: int) -> type:
    """A BoundedChannel class with these bounds (a Site builds one per connection)."""
    return type('BoundedChannel', (BoundedChannel,),
                {'request_seconds': float(seconds), 'max_body': int(max_bytes)})
