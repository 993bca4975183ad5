"""What the playground measures: /proc of every daemon, self-metrics, points on disk."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote
from urllib.request import urlopen

import numpy

from carbon.carbonlink.client import cache_query
from carbon.playground.stack import Stack

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGESIZE")
_METADATA = struct.Struct("!2LfL")
_ARCHIVE = struct.Struct("!3L")
_POINT = numpy.dtype([("t", ">u4"), ("v", ">f8")])


def proc_stats(pid: int) -> dict[str, float] | None:
    """CPU seconds, RSS bytes and bytes written (write calls, and to the block layer)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            stat = handle.read().rsplit(")", 1)[1].split()
        with open("/proc/%d/statm" % pid) as handle:
            rss = int(handle.read().split()[1]) * PAGE
        io: dict[str, int] = {}
        try:
            with open("/proc/%d/io" % pid) as handle:
                for line in handle:
                    key, _, value = line.partition(":")
                    io[key] = int(value)
        except OSError:
            pass
    except (OSError, IndexError, ValueError):
        return None
    return {"cpu": (int(stat[11]) + int(stat[12])) / TICKS, "rss": rss,
            "wchar": io.get("wchar", 0), "write_bytes": io.get("write_bytes", 0)}


class ProcSampler:
    """Samples every daemon's /proc figures every ``interval`` seconds on a thread."""

    def __init__(self, stack: Stack, interval: float) -> None:
        self.stack = stack
        self.interval = interval
        self.samples: dict[str, list[tuple[float, dict[str, float]]]] = {
            daemon.label: [] for daemon in stack.daemons}
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.sample()
        self.thread.start()

    def sample(self) -> None:
        now = time.time()
        for daemon in self.stack.daemons:
            if daemon.proc is None or daemon.proc.poll() is not None:
                continue
            stats = proc_stats(daemon.proc.pid)
            if stats is not None:
                self.samples[daemon.label].append((now, stats))

    def _run(self) -> None:
        while not self.stop_event.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        self.stop_event.set()
        if self.thread.is_alive():
            self.thread.join(10)

    def latest(self, label: str) -> dict[str, float]:
        series = self.samples.get(label) or [(0.0, {})]
        return series[-1][1]


class RenderProbe:
    """Asks the render app for a wildcard of the load's metrics every ``interval``
    seconds while the load runs; keeps each answer's latency."""

    def __init__(self, url: str, target: str, interval: float) -> None:
        self.url = "%s/render?target=%s&format=json&from=-10min" % (url, quote(target))
        self.interval = interval
        self.latencies: list[float] = []
        self.errors = 0
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        while not self.stop_event.wait(self.interval):
            began = time.monotonic()
            try:
                with urlopen(self.url, timeout=10) as answer:
                    answer.read()
                self.latencies.append(time.monotonic() - began)
            except OSError:
                self.errors += 1

    def stop(self) -> dict[str, float]:
        self.stop_event.set()
        if self.thread.is_alive():
            self.thread.join(15)
        ordered = sorted(self.latencies)
        return {"render_requests": len(ordered), "render_errors": self.errors,
                "render_p50_ms": ordered[len(ordered) // 2] * 1000 if ordered else 0.0,
                "render_max_ms": ordered[-1] * 1000 if ordered else 0.0}


def carbonlink_query(port: int, metric: str, timeout: float = 0.5) -> list:
    """Points of ``metric`` still in a cache (carbonlink cache-query); [] on any error."""
    try:
        return cache_query(("127.0.0.1", port), metric, timeout)
    except OSError:
        return []


def read_archive0(path: str) -> tuple[numpy.ndarray, int] | None:
    """(points of archive 0, seconds per point) of a whisper file, or None."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(_METADATA.size + _ARCHIVE.size)
            if len(head) < _METADATA.size + _ARCHIVE.size:
                return None
            offset, seconds, count = _ARCHIVE.unpack_from(head, _METADATA.size)
            handle.seek(offset)
            raw = handle.read(count * _POINT.itemsize)
    except OSError:
        return None
    return numpy.frombuffer(raw[:len(raw) // _POINT.itemsize * _POINT.itemsize],
                            dtype=_POINT), seconds


def load_roots(patterns: list[str]) -> tuple[str, ...] | None:
    """The top-level folders the load's names live in, None when a pattern's first node
    varies (then every folder but carbon/ counts)."""
    roots = []
    for pattern in patterns:
        first = pattern.split(";", 1)[0].split(".", 1)[0]
        if "{" in first:
            return None
        roots.append(first)
    return tuple(roots)


def count_points(data_dirs: list[Path], first: int, last: int,
                 roots: tuple[str, ...] | None = None) -> tuple[int, int]:
    """(points with a timestamp in [first, last], files) over the whisper files below
    ``data_dirs``, in the top-level folders ``roots`` (None: all but carbon/)."""
    points = files = 0
    for data_dir in data_dirs:
        for folder, dirs, names in os.walk(data_dir):
            if Path(folder) == data_dir:
                dirs[:] = [name for name in dirs if name != "carbon"
                           and (roots is None or name in roots)]
            for name in names:
                if not name.endswith(".wsp"):
                    continue
                found = read_archive0(os.path.join(folder, name))
                if found is None:
                    continue
                stamps = found[0]["t"]
                points += int(numpy.count_nonzero((stamps >= first) & (stamps <= last)))
                files += 1
    return points, files


def read_self_metrics(data_dirs: list[Path], since: float) -> dict[str, list[list[float]]]:
    """Every self-metric series written under ``carbon/`` since ``since``:
    {"agents.host-a.cache.size": [[timestamp, value], ...]} in time order."""
    series: dict[str, list[list[float]]] = {}
    for data_dir in data_dirs:
        top = data_dir / "carbon"
        for folder, _dirs, names in os.walk(top):
            for name in names:
                if not name.endswith(".wsp"):
                    continue
                path = os.path.join(folder, name)
                found = read_archive0(path)
                if found is None:
                    continue
                points = found[0]
                points = points[points["t"] >= since]
                if not len(points):
                    continue
                rel = os.path.relpath(path, top)[:-4].replace(os.sep, ".")
                order = numpy.argsort(points["t"], kind="stable")
                series[rel] = [[float(t), float(v)] for t, v in points[order]]
    return series


def split_name(name: str) -> tuple[str, str, str]:
    """``agents.host-a.cache.size`` -> (kind, instance, metric)."""
    kind, instance, metric = name.split(".", 2)
    return kind, instance.rsplit("-", 1)[-1], metric


def by_daemon(series: dict[str, list]) -> dict[str, dict[str, list]]:
    """Self-metric series grouped by daemon label (cache-a, relay-a, aggregator-a)."""
    kinds = {"agents": "cache", "relays": "relay", "aggregator": "aggregator"}
    out: dict[str, dict[str, list]] = {}
    for name, points in series.items():
        try:
            kind, instance, metric = split_name(name)
        except ValueError:
            continue
        label = "%s-%s" % (kinds.get(kind, kind), instance)
        out.setdefault(label, {})[metric] = points
    return out


def live_value(stack: Stack, prefix: str, metric: str) -> float | None:
    """The newest value of a self-metric summed over the caches, through carbonlink
    (points not written yet) or the file; None when no cache has it."""
    total, seen = 0.0, False
    for cache in stack.caches:
        name = "carbon.agents.%s-%s.%s" % (prefix, cache.instance, metric)
        points = carbonlink_query(cache.ports["query"], name)
        if not points:
            path = cache.data_dir / (name.replace(".", "/") + ".wsp")
            found = read_archive0(str(path))
            if found is not None and len(found[0]):
                latest = found[0][numpy.argmax(found[0]["t"])]
                if latest["t"] > 0:
                    points = [(float(latest["t"]), float(latest["v"]))]
        if points:
            total += max(points)[1]
            seen = True
    return total if seen else None


def host_prefix() -> str:
    return socket.gethostname().replace(".", "_")


def summarize_proc(samples: list[tuple[float, dict[str, float]]], start: float,
                   end: float) -> dict[str, Any]:
    """CPU % (of one core), peak RSS and bytes written between ``start`` and ``end``."""
    inside = [sample for sample in samples if start - 1 <= sample[0] <= end + 1]
    if len(inside) < 2:
        return {"cpu_percent": 0.0, "peak_rss": 0, "wchar": 0, "write_bytes": 0}
    first, last = inside[0], inside[-1]
    wall = max(last[0] - first[0], 1e-6)
    return {
        "cpu_percent": (last[1]["cpu"] - first[1]["cpu"]) / wall * 100.0,
        "peak_rss": max(sample[1]["rss"] for sample in inside),
        "wchar": last[1]["wchar"] - first[1]["wchar"],
        "write_bytes": last[1]["write_bytes"] - first[1]["write_bytes"],
    }
