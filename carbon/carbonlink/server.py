"""Carbonlink (port 7002): graphite-web reads the cache's pending points here.

Framing as carbon 1.1.10: a 4-byte big-endian length, then a pickle. Requests
go through the safe unpickler; responses are pickles (protocol 2) of the
reference's exact shapes, made of plain types only (list, tuple, dict, str, int,
float, None): graphite-web's unpickler refuses every other class. Cached points
come plain from ``MetricCache.get``; metadata values from a storage backend go
through ``plain_value``.
"""

from __future__ import annotations

import pickle
import traceback
from dataclasses import dataclass
from typing import Any, Protocol as Structural, cast

from twisted.internet.error import ConnectionDone
from twisted.internet.protocol import Factory, Protocol

from carbon.cache.store import MetricCache
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.logs import CarbonLog
from carbon.formats.pickled import frame, split_frames
from carbon.formats.unpickler import PICKLE_ERRORS, loads
from carbon.storage.backend import StorageBackend
from carbon.writer.writer import Writer

MAX_REQUEST_LENGTH = 1024 ** 3
_PLAIN = (str, int, float, bool, type(None))


def plain_value(value: Any) -> Any:
    """``value`` as plain types: subclasses of str/int/float become the base type,
    numpy-style scalars their ``item()``, containers are copied, anything else ``str``."""
    if type(value) in _PLAIN:
        return value
    for base in (bool, int, float, str):
        if isinstance(value, base):
            return base(value)
    if isinstance(value, dict):
        return {plain_value(k): plain_value(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(plain_value(v) for v in value)
    if isinstance(value, (list, set, frozenset)):
        return [plain_value(v) for v in value]
    # a numpy scalar (third-party) answers item()
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():
        return plain_value(item())
    return str(value)


@dataclass(frozen=True)
class CarbonLinkConfig:
    """What carbonlink reads of carbon.conf, built once (``from_settings``); the
    defaults are carbon.config.defaults'."""

    port: int  # CACHE_QUERY_PORT (0: no carbonlink port)
    interface: str  # CACHE_QUERY_INTERFACE
    backlog: int  # CACHE_QUERY_BACKLOG
    log_cache_hits: bool  # LOG_CACHE_HITS
    insecure_unpickler: bool  # USE_INSECURE_UNPICKLER

    @classmethod
    def from_settings(cls, settings: Settings) -> CarbonLinkConfig:
        return cls(port=int(settings["CACHE_QUERY_PORT"] or 0),
                   interface=str(settings["CACHE_QUERY_INTERFACE"]),
                   backlog=int(settings["CACHE_QUERY_BACKLOG"]),
                   log_cache_hits=bool(settings["LOG_CACHE_HITS"]),
                   insecure_unpickler=bool(settings["USE_INSECURE_UNPICKLER"]))


class CarbonLinkHandler:
    """Answers carbonlink requests from the cache and the storage backend."""

    def __init__(self, cache: MetricCache, database: StorageBackend, config: CarbonLinkConfig,
                 stats: Stats, log: CarbonLog, writer: Writer | None = None) -> None:
        self.cache = cache
        self.database = database
        self.config = config
        self.stats = stats
        self.log = log
        # carbon.writer.writer.Writer (pause/resume) for the resize's requests
        self.writer = writer

    # a request is whatever the safe unpickler gave (checked here); an answer holds plain
    # values of any type (plain_value)
    def handle(self, request: Any, peer: str = "peer", held: set[str] | None = None
               ) -> dict[str, Any]:
        """The answer to one request. ``held``: the metrics this connection paused
        (resumed when it closes)."""
        if not isinstance(request, dict) or "type" not in request:
            return {"error": "Invalid request"}
        kind = request["type"]
        if kind in ("resize-hold", "resize-release"):
            return self._resize(kind, request, peer, held)
        if kind == "cache-query":
            metric = request.get("metric")
            points = self.cache.get(metric) if isinstance(metric, str) else []
            if self.config.log_cache_hits:
                self.log.query('[%s] cache query for "%s" returned %d values'
                               % (peer, metric, len(points)))
            self.stats.increment("cacheQueries")
            return {"datapoints": points}
        if kind == "cache-query-bulk":
            metrics = request.get("metrics") or []
            by_metric = {m: self.cache.get(m) for m in metrics if isinstance(m, str)}
            if self.config.log_cache_hits:
                self.log.query('[%s] cache query bulk for "%d" metrics returned %d values'
                               % (peer, len(metrics), sum(len(v) for v in by_metric.values())))
            self.stats.increment("cacheBulkQueries")
            self.stats.append("cacheBulkQuerySize", len(metrics))
            return {"datapointsByMetric": by_metric}
        if kind == "get-metadata":
            try:
                value = self.database.get_metadata(request["metric"], request["key"])
                return {"value": plain_value(value)}
            except Exception:
                self.log.err()
                return {"error": traceback.format_exc()}
        if kind == "set-metadata":
            try:
                old = self.database.set_metadata(request["metric"], request["key"],
                                                 request["value"])
                return {"old_value": plain_value(old), "new_value": plain_value(request["value"])}
            except Exception:
                self.log.err()
                return {"error": traceback.format_exc()}
        return {"error": 'Invalid request type "%s"' % kind}

    def _resize(self, kind: str, request: dict[str, Any], peer: str, held: set[str] | None
                ) -> dict[str, Any]:
        """A resize (carbon.cluster.resize) pausing the writes of metrics whose files it
        replaces: ``resize-hold`` answers ``{"pending": [...]}``, the metrics still being
        written (ask again until none); ``resize-release`` resumes them. A connection's
        holds end with it, so a resize that dies leaves no metric paused."""
        metrics = request.get("metrics")
        if self.writer is None or held is None:
            return {"error": "resize holds need a persistent carbonlink connection to a "
                             "carbon-cache"}
        if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
            return {"error": "metrics must be a list of metric names"}
        if kind == "resize-hold":
            held.update(metrics)
            return {"pending": self.writer.pause(metrics)}
        self.writer.resume(metrics)
        held.difference_update(metrics)
        self.log.query("[%s] resize released %d metrics" % (peer, len(metrics)))
        return {"released": len(metrics)}

    def end_session(self, held: set[str], peer: str) -> None:
        """A connection closed: resume what it still held."""
        if held and self.writer is not None:
            self.log.query("[%s] closed holding %d metrics: resumed" % (peer, len(held)))
            self.writer.resume(list(held))
            held.clear()

    def respond(self, request: Any, peer: str = "peer", held: set[str] | None = None
                ) -> bytes:
        """The answer to ``request`` as it goes on the wire (a pickle, protocol 2, no
        length prefix)."""
        return pickle.dumps(self.handle(request, peer, held), protocol=2)


class _Transport(Structural):
    """What a connection uses of its Twisted transport (declared here: mypy reads
    Twisted's zope interfaces without their plugin)."""

    def getPeer(self) -> object: ...  # noqa: N802

    def write(self, data: bytes) -> None: ...

    def loseConnection(self) -> None: ...  # noqa: N802


class CarbonLinkProtocol(Protocol):
    """One carbonlink client connection."""

    def __init__(self, handler: CarbonLinkHandler) -> None:
        self.handler = handler
        self.buffer = b""
        self.peer = "peer"
        self.held: set[str] = set()  # metrics this connection paused for a resize

    @property
    def link(self) -> _Transport:
        """The connection's transport (set by Twisted before connectionMade)."""
        return cast(_Transport, self.transport)

    def connectionMade(self) -> None:  # noqa: N802
        peer = self.link.getPeer()
        # Twisted's address: a UNIX socket's has no host or port
        self.peer = "%s:%s" % (getattr(peer, "host", "?"), getattr(peer, "port", "?"))
        self.handler.log.query("%s connected" % self.peer)

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self.handler.end_session(self.held, self.peer)
        if reason is None or reason.check(ConnectionDone):
            self.handler.log.query("%s disconnected" % self.peer)
        else:
            self.handler.log.query("%s connection lost: %s" % (self.peer, reason.value))

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        frames, self.buffer, oversized = split_frames(self.buffer + data, MAX_REQUEST_LENGTH)
        out = []
        insecure = self.handler.config.insecure_unpickler
        for payload in frames:
            try:
                request = loads(payload, insecure)
            except PICKLE_ERRORS as exc:
                self.handler.log.query("[%s] invalid request: %s; closing" % (self.peer, exc))
                self.link.loseConnection()
                return
            out.append(frame(self.handler.respond(request, self.peer, self.held)))
        if oversized is not None:
            self.link.loseConnection()
            return
        if out:
            self.link.write(b"".join(out))


class CarbonLinkFactory(Factory):
    def __init__(self, handler: CarbonLinkHandler) -> None:
        self.handler = handler

    def buildProtocol(self, addr: Any) -> CarbonLinkProtocol:  # noqa: N802
        return CarbonLinkProtocol(self.handler)
