"""A small carbonlink client: one request, one answer, over a fresh TCP connection.

The framing is :mod:`carbon.formats.pickled`'s (4-byte big-endian length, then a pickle
of protocol 2); answers go through the safe unpickler, as graphite-web reads them.
Callers: the cluster agent (points still cached before a file moves), the playground's
sampler (live self-metrics) and the cache benchmark (points held by a cache).
"""

from __future__ import annotations

import pickle
import socket
from typing import Any

from carbon.formats.pickled import frame, frame_length, recv_exactly
from carbon.formats.unpickler import PICKLE_ERRORS, safe_loads

__all__ = ["CarbonlinkError", "request", "cache_query", "cache_query_bulk", "Session"]

Address = tuple[str, int]


class CarbonlinkError(OSError):
    """The cache closed the connection early or answered something that is not a dict."""


def request(address: Address, message: dict[str, Any], timeout: float = 10.0) -> dict:
    """Send one carbonlink request (e.g. ``{"type": "cache-query", "metric": m}``) to
    ``address`` (host, CACHE_QUERY_PORT) and return the answer dict; OSError (a
    :class:`CarbonlinkError` for a short or malformed answer) when that fails."""
    with socket.create_connection(address, timeout=timeout) as sock:
        return _exchange(sock, message)


class Session:
    """One persistent carbonlink connection: requests answered in order on it. The
    cache ties a resize's holds to the connection (released when it closes)."""

    def __init__(self, address: Address, timeout: float = 10.0) -> None:
        self.address = address
        self.sock = socket.create_connection(address, timeout=timeout)

    def request(self, message: dict[str, Any]) -> dict:
        return _exchange(self.sock, message)

    def close(self) -> None:
        self.sock.close()


def _exchange(sock: socket.socket, message: dict[str, Any]) -> dict:
    sock.sendall(frame(pickle.dumps(message, protocol=2)))
    try:
        body = recv_exactly(sock, frame_length(recv_exactly(sock, 4)))
    except EOFError as exc:
        raise CarbonlinkError("carbonlink %s" % exc) from exc
    try:
        answer = safe_loads(body)
    except PICKLE_ERRORS as exc:
        raise CarbonlinkError("carbonlink answer is not a safe pickle: %s" % exc) from exc
    if not isinstance(answer, dict):
        raise CarbonlinkError("carbonlink answered %s, not a dict" % type(answer).__name__)
    return answer


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
