"""The TCP (or TLS) connection to one destination, driven by its DestinationClient."""

from __future__ import annotations

from typing import Any

from twisted.internet.interfaces import IHalfCloseableProtocol, IPushProducer
from twisted.internet.protocol import ClientFactory, Protocol
from zope.interface import implementer

from carbon.config.errors import ConfigError

# Bytes written to a destination in one send, and buffered before the connection
# pauses sending (Twisted: 128 KiB and 64 KiB): a whole read's share goes out at once.
WRITE_BYTES = 256 * 1024


@implementer(IPushProducer, IHalfCloseableProtocol)
class SenderProtocol(Protocol):
    """The connection to a destination; pauses when the socket buffer is full."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.paused = False
        self.closing = False
        self.closed_by_us = False  # our clean close: nothing written needs resending

    def connectionMade(self) -> None:  # noqa: N802
        self.client.config.keepalive.enable(self.transport)
        if hasattr(self.transport, "SEND_LIMIT"):  # a TCP transport (not TLS)
            self.transport.SEND_LIMIT = self.transport.bufferSize = WRITE_BYTES
        self.transport.registerProducer(self, True)
        self.client.connection_made(self)

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        """Destinations send nothing back; ignore anything they do."""

    def readConnectionLost(self) -> None:  # noqa: N802
        """The peer is closing: stop writing, flush what was written, then close."""
        self.finish_writing()

    def finish_writing(self) -> None:
        """Close once the transport's buffer is written (a registered producer would
        keep the connection open forever, so unregister first)."""
        self.closing = True
        self.transport.unregisterProducer()
        self.transport.loseConnection()

    def writeConnectionLost(self) -> None:  # noqa: N802
        self.closing = True

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self.closing = True
        self.client.connection_lost(self, reason)

    def pauseProducing(self) -> None:  # noqa: N802
        self.paused = True

    def resumeProducing(self) -> None:  # noqa: N802
        self.paused = False
        self.client.wake()

    def stopProducing(self) -> None:  # noqa: N802
        self.closing = True


def tls_options(ca_file: str | None, host: str) -> Any:
    """Client TLS options for DESTINATION_TRANSPORT = ssl (``ca_file``:
    DESTINATION_SSL_CA, optional)."""
    try:
        import OpenSSL  # noqa: F401
        from twisted.internet import ssl
    except ImportError:
        raise ConfigError("SSL destination transport request, but no Python OpenSSL "
                          "available.", key="DESTINATION_TRANSPORT") from None
    authority = None
    if ca_file:
        try:
            with open(ca_file) as handle:
                authority = ssl.Certificate.loadPEM(handle.read())
        except OSError:
            raise ConfigError("Failed to read CA chain: %s" % ca_file,
                              key="DESTINATION_SSL_CA") from None
    return ssl.optionsForClientTLS(host, authority)


class SenderFactory(ClientFactory):
    def __init__(self, client: Any) -> None:
        self.client = client

    def buildProtocol(self, addr: Any) -> SenderProtocol:  # noqa: N802
        return SenderProtocol(self.client)

    def clientConnectionFailed(self, connector: Any, reason: Any) -> None:  # noqa: N802
        self.client.connect_failed(reason)
