"""The render app's CarbonLink pool: ask carbon-cache instances for points not yet
written to disk.

One ``cache-query-bulk`` request per cache per render request (hosts queried in
parallel), all within CARBONLINK_TIMEOUT. Metrics are placed on caches with the same
consistent-hash ring carbon-relay uses (carbon.hashing), so each metric is asked of
the cache that holds it. Connections are kept per cache; each request and answer is
carbon's client's ``exchange`` (carbon.carbonlink.client), answers read with
graphite-web's unpickler table.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, TimeoutError as FutureTimeout
from typing import Any, Optional

from carbon.carbonlink.client import CarbonlinkClosed, CarbonlinkError, exchange
from carbon.hashing import ConsistentHashRing
from webapp.cpu_gate import NO_GATE
from webapp.settings import parse_host
from webapp.storage.nodes import safe_loads
from webapp import pysum

log = logging.getLogger("webapp.carbonlink")

Host = tuple  # (server, instance)


class CarbonLinkPool:
    """Persistent connections to every CARBONLINK_HOSTS entry, with carbon's hash ring."""

    def __init__(self, hosts: list[str], timeout: float = 1.0, hash_type: str = 'carbon_ch',
                 retry_delay: float = 15, replication_factor: int = 1,
                 metric_prefix: str = 'carbon', protocol: int = 2) -> None:
        parsed = [parse_host(h) for h in hosts]
        self.hosts: list[Host] = [(server, instance) for server, _, instance in parsed]
        self.ports = {(server, instance): port for server, port, instance in parsed}
        self.timeout = float(timeout)
        self.retry_delay = float(retry_delay)
        self.replication_factor = max(1, int(replication_factor))
        self.metric_prefix = metric_prefix
        self.protocol = protocol
        self.ring = ConsistentHashRing(self.hosts, hash_type=hash_type) if self.hosts else None
        self.last_failure: dict[Host, float] = {}
        self._idle: dict[Host, list[socket.socket]] = {h: [] for h in self.hosts}
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=max(2, len(self.hosts) + 1),
                                            thread_name_prefix='carbonlink')
        self.gate = NO_GATE  # the app's CpuGate: released while waiting on caches

    @classmethod
    def from_settings(cls, settings: Any) -> CarbonLinkPool:
        return cls(settings.CARBONLINK_HOSTS, settings.CARBONLINK_TIMEOUT,
                   settings.CARBONLINK_HASHING_TYPE, settings.CARBONLINK_RETRY_DELAY,
                   int(settings.REPLICATION_FACTOR), settings.CARBON_METRIC_PREFIX,
                   int(settings.CARBONLINK_PICKLE_PROTOCOL))

    def close(self) -> None:
        """Close idle connections and stop the worker threads."""
        with self._lock:
            for conns in self._idle.values():
                for conn in conns:
                    conn.close()
                conns.clear()
        self._executor.shutdown(wait=False)

    def is_available(self, host: Host) -> bool:
        return time.monotonic() - self.last_failure.get(host, -1e18) >= self.retry_delay

    def select_host(self, metric: str) -> Optional[Host]:
        """The cache holding ``metric``: first replica not recently failed, else None."""
        if self.ring is None:
            return None
        replicas: list[Host] = []
        servers: set[str] = set()
        for node in self.ring.get_nodes(metric):
            if node[0] in servers:
                continue
            servers.add(node[0])
            replicas.append(node)
            if len(servers) >= self.replication_factor:
                break
        for host in replicas:
            if self.is_available(host):
                return host
        return None

    # --- bulk queries ------------------------------------------------------------------------
    def query_bulk_async(self, metrics: list[str]) -> Future:
        """Start :meth:`query_bulk` in the background; collect with :meth:`wait`."""
        return self._executor.submit(self.query_bulk, metrics)

    def wait(self, future: Future) -> dict[str, list]:
        """The result of a :meth:`query_bulk_async`, or {} once the time budget is spent."""
        try:
            with self.gate.released():
                return future.result(timeout=self.timeout + 0.5)
        except FutureTimeout:
            log.warning("carbonlink bulk query exceeded %.3fs", self.timeout)
            return {}
        except Exception as err:  # noqa: BLE001 - the cache is optional, whisper still answers
            log.warning("carbonlink bulk query failed: %s", err)
            return {}

    def query_bulk(self, metrics: list[str]) -> dict[str, list[tuple[int, float]]]:
        """Cached points of ``metrics``: {metric: [(timestamp, value), ...]}.

        One request per cache, in parallel, all within the timeout. Metrics under
        CARBON_METRIC_PREFIX are asked of every cache (each reports its own).
        """
        if not self.hosts or not metrics:
            return {}
        deadline = time.monotonic() + self.timeout
        by_host: dict[Host, list[str]] = {}
        for metric in metrics:
            if metric.startswith(self.metric_prefix):
                for host in self.hosts:
                    if self.is_available(host):
                        by_host.setdefault(host, []).append(metric)
                continue
            host = self.select_host(metric)
            if host is not None:
                by_host.setdefault(host, []).append(metric)
        if not by_host:
            return {}
        items = list(by_host.items())
        answers: list[dict] = []
        if len(items) == 1:
            answers.append(self._bulk_one(items[0][0], items[0][1], deadline))
        else:
            futures = [self._executor.submit(self._bulk_one, h, m, deadline) for h, m in items]
            for fut in futures:
                try:
                    answers.append(fut.result(timeout=max(0.0, deadline - time.monotonic())
                                              + 0.05))
                except FutureTimeout:
                    log.warning("carbonlink: no answer within %.3fs", self.timeout)
        merged: dict[str, list] = {}
        for answer in answers:
            for metric, points in answer.items():
                if points:
                    if metric in merged:
                        combined = dict(merged[metric])
                        combined.update(points)
                        merged[metric] = sorted(combined.items())
                    else:
                        merged[metric] = list(points)
        return merged

    def _bulk_one(self, host: Host, metrics: list[str], deadline: float) -> dict[str, list]:
        request = {'type': 'cache-query-bulk', 'metrics': metrics}
        try:
            result = self.send_request(host, request, deadline)
        except Exception as err:  # noqa: BLE001 - logged, whisper data still served
            log.warning("carbonlink %s:%s failed: %s", host[0], self.ports[host], err)
            return {}
        return result.get('datapointsByMetric') or {}

    def query(self, metric: str) -> list[tuple[int, float]]:
        """Cached points of one metric (``cache-query``)."""
        with self.gate.released():
            return self.query_bulk([metric]).get(metric, [])

    # --- wire ------------------------------------------------------------------------------
    def send_request(self, host: Host, request: dict, deadline: Optional[float] = None) -> dict:
        """Send one request to ``host`` over a pooled connection and return its answer
        (carbon.carbonlink.client.exchange, with graphite-web's unpickler table)."""
        if deadline is None:
            deadline = time.monotonic() + self.timeout
        for attempt in (0, 1):
            conn, reused = self._connection(host, deadline)
            try:
                conn.settimeout(max(0.001, deadline - time.monotonic()))
                result = exchange(conn, request, deadline, self.protocol, safe_loads)
            except Exception as err:
                conn.close()
                if reused and attempt == 0 \
                        and isinstance(err, (ConnectionError, CarbonlinkClosed)):
                    continue  # stale pooled socket: retry once on a fresh one
                self.last_failure[host] = time.monotonic()
                raise
            with self._lock:
                self._idle[host].append(conn)
            if 'error' in result:
                raise CarbonlinkError(result['error'])
            return result
        raise CarbonlinkError('unreachable')  # pragma: no cover

    def _connection(self, host: Host, deadline: float) -> tuple[socket.socket, bool]:
        with self._lock:
            idle = self._idle[host]
            if idle:
                return idle.pop(), True
        try:
            conn = socket.create_connection((host[0], self.ports[host]),
                                            max(0.001, deadline - time.monotonic()))
        except OSError:
            self.last_failure[host] = time.monotonic()
            raise
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, False


def _consolidate(func: str, values: list) -> Optional[float]:
    usable = [v for v in values if v is not None]
    if not usable:
        return None
    if func == 'avg_zero':
        return pysum.total(0 if v is None else v for v in values) / len(values)
    if func == 'sum':
        return pysum.total(usable)
    if func == 'average':
        return pysum.total(usable) / len(usable)
    if func == 'max':
        return max(usable)
    if func == 'min':
        return min(usable)
    if func == 'last':
        return usable[-1]
    if func == 'absmax':
        return max(usable, key=abs)
    if func == 'absmin':
        return min(usable, key=abs)
    raise ValueError("Invalid consolidation function: '%s'" % func)


def merge_with_cache(cached: list, start: int, step: int, values: list,
                     func: Optional[str] = None, raw_step: Optional[int] = None) -> list:
    """Overlay cached (timestamp, value) points on whisper values (graphite-web's rules).

    Points are first reduced to one per raw (finest archive) interval, keeping the last,
    as whisper would store them; when the fetched step is coarser they are aggregated
    per step with the metric's aggregation method.
    """
    points = list(cached.items()) if isinstance(cached, dict) else list(cached)
    if raw_step is not None and raw_step > 1:
        last: dict[int, Any] = {}
        for ts, value in points:
            last[ts - (ts % raw_step)] = value
        points = list(last.items())
    if func and step != raw_step:
        buckets: dict[int, list] = {}
        for ts, value in points:
            buckets.setdefault(ts - (ts % step), []).append(value)
        points = [(ts, _consolidate(func, vals)) for ts, vals in buckets.items()]
    n = len(values)
    for ts, value in points:
        try:
            i = int(ts - start) // step
        except (TypeError, ValueError):
            continue
        if 0 <= i < n:
            values[i] = value
    return values
