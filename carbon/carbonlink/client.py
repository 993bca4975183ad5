"""The carbonlink client: one request, one answer (``exchange``), over a fresh TCP
connection (``request``) or one the caller keeps (the render app's pool,
webapp.storage.carbonlink).

The framing is :mod:`carbon.formats.pickled`'s (4-byte big-endian length, then a pickle
of protocol 2); answers go through the safe unpickler, as graphite-web reads them.
Callers: the cluster agent (points still cached before a file moves), the playground's
sampler (live self-metrics) and the cache benchmark (points held by a cache).
"""

from __future__ import annotations

import pickle
import socket
from typing import Any, Callable

from carbon.formats.pickled import frame, frame_length, recv_exactly
from carbon.formats.unpickler import PICKLE_ERRORS, safe_loads

__all__ = ["CarbonlinkClosed", "CarbonlinkError", "exchange", "request", "cache_query",
           "cache_query_bulk", "Session"]

Address = tuple[str, int]


MAX_ANSWER = 1024 ** 3  # bytes an answer may announce (a bogus length is refused)


class CarbonlinkError(OSError):
    """The cache closed the connection early or answered something that is not a dict
    (the render app's pool also raises it for an answer naming an error)."""


class CarbonlinkClosed(CarbonlinkError):
    """The cache closed the connection before its whole answer (a pooled connection it
    closed meanwhile, say)."""


def exchange(sock: socket.socket, message: dict[str, Any], deadline: float | None = None,
             protocol: int = 2, loads: Callable[[bytes], Any] = safe_loads) -> dict:
    """One carbonlink request and its answer on a connected ``sock``: the request
    pickled (``protocol``) and framed, the answer's frame read (by ``deadline``, a
    ``time.monotonic()`` value: TimeoutError after it) and loaded with ``loads`` (a
    safe unpickler). CarbonlinkClosed when the cache closes first, CarbonlinkError for
    an answer too large, not a safe pickle or not a dict."""
    sock.sendall(frame(pickle.dumps(message, protocol=protocol)))
    try:
        size = frame_length(recv_exactly(sock, 4, deadline))
        if size > MAX_ANSWER:
            raise CarbonlinkError("carbonlink answer too large (%d bytes)" % size)
        body = recv_exactly(sock, size, deadline)
    except EOFError as exc:
        raise CarbonlinkClosed("carbonlink %s" % exc) from exc
    try:
        answer = loads(body)
    except PICKLE_ERRORS as exc:
        raise CarbonlinkError("carbonlink answer is not a safe pickle: %s" % exc) from exc
    if not isinstance(answer, dict):
        raise CarbonlinkError("carbonlink answered %s, not a dict" % type(answer).__name__)
    return answer


def request(address: Address, message: dict[str, Any], timeout: float = 10.0) -> dict:
    """Send one carbonlink request (e.g. ``{"type": "cache-query", "metric": m}``) to
    ``address`` (host, CACHE_QUERY_PORT) over a fresh connection and return the answer
    dict; OSError (a :class:`CarbonlinkError` for a short or malformed answer) when
    that fails."""
    with socket.create_connection(address, timeout=timeout) as sock:
        return exchange(sock, message)


class Session:
    """One persistent carbonlink connection: requests answered in order on it. The
    cache ties a resize's holds to the connection (released when it closes)."""

    def __init__(self, address: Address, timeout: float = 10.0) -> None:
        self.address = address
        self.sock = socket.create_connection(address, timeout=timeout)

    def request(self, message: dict[str, Any]) -> dict:
        return exchange(self.sock, message)

    def close(self) -> None:
        self.sock.close()


def cache_query(address: Address, metric: str, timeout: float = 10.0
                ) -> list[tuple[int, float]]:
    """The points of ``metric`` held in the cache at ``address`` (not yet on disk)."""
    answer = request(address, {"type": "cache-query", "metric": metric}, timeout)
    return [(int(ts), float(value)) for ts, value in answer.get("datapoints") or ()]


def cache_query_bulk(address: Address, metrics: list[str], timeout: float = 10.0
                     ) -> dict[str, list[tuple[int, float]]]:
    """{metric: cached points} for the ``metrics`` the cache at ``address`` holds."""
    answer = request(address, {"type": "cache-query-bulk", "metrics": list(metrics)},
                     timeout)
    return {name: [(int(ts), float(value)) for ts, value in points]
            for name, points in (answer.get("datapointsByMetric") or {}).items()}
