"""Runs a scenario's sweep: per point a stack, the load, samples, on-disk counts, a row."""

from __future__ import annotations

import dataclasses
import math
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from carbon.playground import sampler as sampling
from carbon.playground.loadgen import LoadProfile, LoadResult, run_load
from carbon.playground.scenario import REPEAT, Scenario
from carbon.playground.stack import (Daemon, Stack, build, precreate, start, start_render,
                                     write_disk_profile)

STARTUP_GUESS = 4.0  # seconds a point needs besides load and settling, for the ETA


def expected_rounds(load: LoadProfile) -> int:
    """Rounds (points a metric) the load sends at most."""
    if load.points:
        total = float(load.points)
    else:
        peak = max(load.rate, load.ramp_to if load.shape == "ramp" else 0.0)
        if load.shape == "bursts":
            peak = load.rate * max(load.burst_factor, 1.0)
        total = peak * load.duration
    return math.ceil(total / max(load.metrics, 1)) + 2


def _roots(load: LoadProfile) -> tuple[str, ...] | None:
    patterns = [load.pattern] + ([load.new_pattern] if load.new_per_minute else [])
    return sampling.load_roots(patterns)


def render_target(load: LoadProfile) -> str:
    """A wildcard over the load's first group of metrics: ``{i}`` and ``{g}`` -> ``*``,
    tags dropped."""
    name = load.pattern.split(";", 1)[0]
    return name.replace("{i}", "*").replace("{g}", "0")


def point_label(point: dict[str, Any]) -> str:
    parts = ["%s=%s" % (key, value) for key, value in point.items()
             if key not in ("subject", REPEAT)]
    label = " ".join(parts) + " [%s]" % point["subject"]
    return label + (" (run %d)" % point[REPEAT] if point.get(REPEAT) else "")


class Progress:
    """One status line: sweep point, elapsed and remaining time, live figures."""

    def __init__(self, total: int, per_point: float, stream: Any = None) -> None:
        self.total = total
        self.per_point = per_point
        self.stream = stream or sys.stderr
        # any file-like stream
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.began = time.monotonic()
        self.point_began = self.began  # the current sweep point's start
        self.done = 0
        self.last_line = 0.0
        self.label = ""

    def point(self, index: int, label: str) -> None:
        self.done = index
        self.label = label
        self.point_began = time.monotonic()

    def remaining(self) -> float:
        """Seconds left: the points done so far took ``per`` each on average."""
        now = time.monotonic()
        began = self.point_began
        per = (began - self.began) / self.done if self.done else self.per_point
        return max(0.0, per * (self.total - self.done) - (now - began))

    def show(self, phase: str, sent: int, committed: float | None, cache: float | None,
             force: bool = False, received: float | None = None) -> None:
        now = time.monotonic()
        if not force and not self.tty and now - self.last_line < 5:
            return
        self.last_line = now
        fill = int(20 * self.done / max(self.total, 1))
        text = ("[%s%s] %d/%d %s | %s | elapsed %s, ~%s left | sent %d, received %s/s, "
                "committed %s/s, cache %s" % (
                    "#" * fill, "." * (20 - fill), self.done + 1, self.total, self.label,
                    phase, _clock(now - self.began), _clock(self.remaining()), sent,
                    _num(received), _num(committed), _num(cache)))
        if self.tty:
            self.stream.write("\r\x1b[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return "%d:%02d" % (seconds // 60, seconds % 60)


def _num(value: float | None) -> str:
    return "-" if value is None else "%.0f" % value


class PointRun:
    """One sweep point on one stack: load, settle, measurements."""

    def __init__(self, scenario: Scenario, stack: Stack, progress: Progress,
                 stop: threading.Event) -> None:
        self.scenario = scenario
        self.stack = stack
        self.progress = progress
        self.stop = stop
        self.host = sampling.host_prefix()
        self.files_seen: list[tuple[float, int]] = []  # (when, files) while settling
        self.all_files_at: float | None = None  # when every name sent had its file

    def live(self, phase: str, sent: int) -> None:
        interval = self.scenario.settings.interval
        per_second = []
        for metric in ("metricsReceived", "committedPoints"):
            value = sampling.live_value(self.stack, self.host, metric)
            per_second.append(None if value is None else value / interval)
        cache = sampling.live_value(self.stack, self.host, "cache.size")
        self.progress.show(phase, sent, per_second[1], cache, received=per_second[0])

    def load(self, start_stamp: int) -> tuple[LoadResult, float, float]:
        entry = self.stack.entry
        port = entry.ports["pickle" if self.scenario.load.protocol == "pickle" else "line"]
        profile = dataclasses.replace(self.scenario.load, host="127.0.0.1", port=port,
                                      start=start_stamp)
        sent = [0]

        def second(index: int, count: int) -> None:
            sent[0] += count
            self.live("load %d/%.0fs" % (index + 1, profile.duration or 0), sent[0])

        began = time.time()
        result = run_load(profile, stop=self.stop, on_second=second)
        return result, began, time.time()

    def warm(self, stamp: int) -> float:
        """One point (timestamp ``stamp - step``, outside the measured window) to every
        metric, then wait until every file exists; returns the seconds it took (0 with
        ``warmup`` off or the files made by ``precreate``)."""
        if not self.scenario.settings.warmup or self.stack.precreated:
            return 0.0
        began = time.time()
        entry = self.stack.entry
        load = self.scenario.load
        port = entry.ports["pickle" if load.protocol == "pickle" else "line"]
        profile = dataclasses.replace(load, host="127.0.0.1", port=port, rate=0.0,
                                      duration=0.0, points=load.metrics, new_per_minute=0.0,
                                      start=stamp - load.step)
        run_load(profile, stop=self.stop)
        dirs = [cache.data_dir for cache in self.stack.caches]
        deadline = began + self.scenario.settings.settle_timeout
        while time.time() < deadline and not self.stop.is_set():
            _points, files = sampling.count_points(dirs, 0, 0, _roots(load))
            if files >= load.metrics:
                break
            self.progress.show("warm-up: %d of %d files" % (files, load.metrics), 0, None, None)
            time.sleep(0.5)
        return time.time() - began

    def settle(self, result: LoadResult, load_end: float) -> tuple[int, float | None]:
        """Wait until every point sent is on disk (or settle_timeout); (on disk, seconds
        after the load ended, None if never)."""
        deadline = load_end + self.scenario.settings.settle_timeout
        dirs = [cache.data_dir for cache in self.stack.caches]
        while True:
            on_disk, files = sampling.count_points(dirs, result.first_timestamp,
                                                   result.last_timestamp,
                                                   _roots(self.scenario.load))
            self.files_seen.append((time.time(), files))
            if files >= min(result.names, result.sent) and self.all_files_at is None:
                self.all_files_at = time.time()
            if on_disk >= result.sent:
                return on_disk, time.time() - load_end
            if time.time() >= deadline or self.stop.is_set():
                return on_disk, None
            self.live("settling", result.sent)
            time.sleep(min(1.0, self.scenario.settings.interval))


def run_sweep(scenario: Scenario, workdir: Path, reference: Path | None,
              on_row: Callable[[dict], None], stop: threading.Event | None = None,
              stream: Any = None) -> list[dict]:
    """Run every point; ``on_row`` gets each finished row (the report is rewritten with
    it, so an interrupted run keeps what it measured)."""
    stop = stop or threading.Event()
    points = scenario.runs()
    per_point = (scenario.load.duration or 10) + STARTUP_GUESS + 5
    progress = Progress(len(points), per_point, stream)
    rows: list[dict] = []
    try:
        if scenario.settings.mode == "hup":
            rows = _run_hup(scenario, points, workdir, reference, progress, stop, on_row)
        else:
            for index, point in enumerate(points):
                if stop.is_set():
                    break
                progress.point(index, point_label(point))
                row = _run_restart(scenario, point, index, workdir, reference, progress, stop)
                rows.append(row)
                on_row(row)
    finally:
        progress.finish()
    return rows


def _profile_dir(scenario: Scenario, workdir: Path) -> Path | None:
    return workdir / "profiles" if scenario.settings.profile else None


def _run_restart(scenario: Scenario, point: dict, index: int, workdir: Path,
                 reference: Path | None, progress: Progress, stop: threading.Event) -> dict:
    pointdir = workdir / ("point-%02d" % index)
    stack = build(scenario, point, pointdir, expected_rounds(scenario.load), reference)
    proc_sampler = sampling.ProcSampler(stack, min(scenario.settings.interval, 1.0))
    spies: list[tuple[Daemon, subprocess.Popen, Path]] = []
    timings: dict[str, Any] = {}
    result = LoadResult()
    probe: sampling.RenderProbe | None = None
    try:
        progress.show("starting", 0, None, None, force=True)
        _precreate(scenario, stack)
        start(stack, reference, _profile_dir(scenario, workdir))
        proc_sampler.start()
        if scenario.settings.profile:
            spies = _start_spies(stack, pointdir, scenario)
        run = PointRun(scenario, stack, progress, stop)
        start_stamp = int(time.time()) // scenario.load.step * scenario.load.step
        warmed = run.warm(start_stamp)
        if scenario.topology.render:
            probe = sampling.RenderProbe(start_render(stack, pointdir),
                                         render_target(scenario.load),
                                         scenario.settings.interval)
            probe.start()
        result, load_start, load_end = run.load(start_stamp)
        if probe is not None:
            timings["render"] = probe.stop()
        on_disk, to_disk = run.settle(result, load_end)
        timings.update({"load_start": load_start, "load_end": load_end, "stop": time.time(),
                        "time_to_disk": to_disk, "warmup_seconds": warmed,
                        "files_seen": run.files_seen, "all_files_at": run.all_files_at})
    finally:
        if probe is not None:
            probe.stop()
        progress.show("stopping", result.sent, None, None, force=True)
        stop_took = stack.stop(scenario.settings.stop_timeout)
        proc_sampler.stop()
        for _daemon, spy, _out in spies:
            _end(spy)
    timings["stop_took"] = stop_took
    return _row(scenario, point, index, stack, proc_sampler, result, timings, pointdir, spies)


def _run_hup(scenario: Scenario, points: list[dict], workdir: Path, reference: Path | None,
             progress: Progress, stop: threading.Event, on_row: Callable[[dict], None]
             ) -> list[dict]:
    """One stack per subject and disk; each point rewrites carbon.conf and sends SIGHUP.
    carbon 1.1.10 does not re-read these keys on SIGHUP: its points restart."""
    rows: list[dict] = []
    by_stack: dict[tuple[str, str], list[tuple[int, dict]]] = {}
    for index, point in enumerate(points):
        if point["subject"] == "reference":
            continue
        by_stack.setdefault((point["subject"], point.get("disk", "none")), []).append(
            (index, point))
    position = 0  # points begun, for the progress line (indices run out of order here)
    for (subject, disk), items in by_stack.items():
        if stop.is_set():
            break
        first = items[0][1]
        stackdir = workdir / ("hup-%s-%s" % (subject, disk))
        rounds = expected_rounds(scenario.load) * len(items)
        stack = build(scenario, first, stackdir, rounds, reference)
        proc_sampler = sampling.ProcSampler(stack, min(scenario.settings.interval, 1.0))
        finished: list[tuple[int, dict, LoadResult, dict]] = []
        try:
            progress.point(position, point_label(first))
            progress.show("starting", 0, None, None, force=True)
            _precreate(scenario, stack)
            start(stack, reference, _profile_dir(scenario, workdir))
            proc_sampler.start()
            run = PointRun(scenario, stack, progress, stop)
            stamp = int(time.time()) // scenario.load.step * scenario.load.step
            run.warm(stamp)
            for index, point in items:
                if stop.is_set():
                    break
                progress.point(position, point_label(point))
                position += 1
                if index != items[0][0]:
                    _hup(stack, scenario, point)
                result, load_start, load_end = run.load(stamp)
                stamp = result.last_timestamp + scenario.load.step
                _on_disk, to_disk = run.settle(result, load_end)
                finished.append((index, point, result, {
                    "load_start": load_start, "load_end": load_end, "stop": time.time(),
                    "time_to_disk": to_disk}))
        finally:
            stop_took = stack.stop(scenario.settings.stop_timeout)
            proc_sampler.stop()
        for index, point, result, timings in finished:
            timings["stop_took"] = stop_took
            row = _row(scenario, point, index, stack, proc_sampler, result, timings, stackdir,
                       [])
            rows.append(row)
            on_row(row)
    for index, point in enumerate(points):
        if point["subject"] != "reference" or stop.is_set():
            continue
        progress.point(position, point_label(point))
        position += 1
        row = _run_restart(scenario, point, index, workdir, reference, progress, stop)
        rows.append(row)
        on_row(row)
    return rows


def _precreate(scenario: Scenario, stack: Stack) -> None:
    if scenario.settings.precreate:
        stack.precreated = precreate(scenario, stack) is not None


def _hup(stack: Stack, scenario: Scenario, point: dict) -> None:
    """Rewrite each daemon's carbon.conf with the point's values and SIGHUP it."""
    for daemon in stack.daemons:
        settings = dict(daemon.settings)
        for key, value in point.items():
            if key not in ("disk", "subject", REPEAT):
                settings[key] = str(value)
        daemon.write_conf(settings)
        write_disk_profile(daemon, point.get("disk", "none"))
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.proc.send_signal(signal.SIGHUP)  # every daemon of ours reloads on it
    time.sleep(max(1.0, scenario.settings.interval))


def _start_spies(stack: Stack, pointdir: Path, scenario: Scenario
                 ) -> list[tuple[Daemon, subprocess.Popen, Path]]:
    spy = shutil.which("py-spy")
    if spy is None:
        return []  # cProfile was started with the daemons instead
    out = []
    for daemon in stack.daemons:
        assert daemon.proc is not None
        target = pointdir / ("profile-%s.svg" % daemon.label)
        proc = subprocess.Popen([spy, "record", "--pid", str(daemon.proc.pid), "--output",
                                 str(target), "--duration",
                                 str(int(scenario.load.duration or 10) + 2), "--nonblocking"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out.append((daemon, proc, target))
    return out


def _end(proc: subprocess.Popen) -> None:
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(10)


def _sum_series(per_daemon: dict[str, dict[str, list]], metric: str,
                kind: str = "cache") -> dict[float, float]:
    total: dict[float, float] = {}
    for label, series in per_daemon.items():
        if not label.startswith(kind + "-"):
            continue
        for stamp, value in series.get(metric, []):
            total[stamp] = total.get(stamp, 0.0) + value
    return dict(sorted(total.items()))


def _window(series: dict[float, float], start: float, end: float) -> list[float]:
    return [value for stamp, value in series.items() if start <= stamp <= end]


def _row(scenario: Scenario, point: dict, index: int, stack: Stack,
         proc_sampler: sampling.ProcSampler, result: LoadResult, timings: dict,
         pointdir: Path, spies: list) -> dict:
    """The measurements of one point."""
    interval = scenario.settings.interval
    dirs = [cache.data_dir for cache in stack.caches]
    on_disk, files = sampling.count_points(dirs, result.first_timestamp, result.last_timestamp,
                                           _roots(scenario.load))
    load_start = timings.get("load_start", time.time())
    load_end = timings.get("load_end", load_start)
    stopped = timings.get("stop", load_end)
    self_metrics = sampling.by_daemon(sampling.read_self_metrics(dirs, load_start - interval))
    received = _sum_series(self_metrics, "metricsReceived")
    committed = _sum_series(self_metrics, "committedPoints")
    updates = _sum_series(self_metrics, "updateOperations")
    cache_size = _sum_series(self_metrics, "cache.size")
    in_load = (load_start, load_end + interval)

    def rate(series: dict[float, float]) -> float:
        values = _window(series, *in_load)
        return sum(values) / (len(values) * interval) if values else 0.0

    committed_rate, update_rate = rate(committed), rate(updates)
    sizes = _window(cache_size, load_start, stopped + interval)
    proc = {label: sampling.summarize_proc(samples, load_start, stopped)
            for label, samples in proc_sampler.samples.items()}
    total_cpu = sum(item["cpu_percent"] for item in proc.values())
    peak_rss = _peak_total_rss(proc_sampler.samples, load_start, stopped)
    written = sum(item["wchar"] for label, item in proc.items() if label.startswith("cache"))
    active = max(stopped - load_start, 1e-6)
    creates = _sum_series(self_metrics, "creates")
    deferred = _sum_series(self_metrics, "deferredCreates")
    dropped = _sum_series(self_metrics, "droppedCreates")
    relay_queue = {}
    for label, series in self_metrics.items():
        for name, points in series.items():
            if name.endswith(("relayMaxQueueLength", ".queued", ".spool", "queueSize")):
                relay_queue["%s.%s" % (label, name)] = points
    cpu_series = {label: _cpu_series(samples) for label, samples in proc_sampler.samples.items()}
    rss_series = {label: [[stamp, stats["rss"] / 2**20] for stamp, stats in samples]
                  for label, samples in proc_sampler.samples.items()}
    disk = point.get("disk", "none")
    row = {
        "index": index,
        "label": point_label(point),
        "point": point,
        "subject": point["subject"],
        "disk": disk,
        "disk_emulated": disk != "none",
        "sent": result.sent,
        "sent_per_s": result.rate,
        "load_seconds": result.elapsed,
        "metrics": result.names,
        "received_per_s": rate(received),
        "committed_per_s": committed_rate,
        "update_ops_per_s": update_rate,
        "points_per_update": committed_rate / update_rate if update_rate else 0.0,
        "avg_update_time_ms": _mean(_window(_sum_series(self_metrics, "avgUpdateTime"),
                                            *in_load)) * 1000.0 / max(len(stack.caches), 1),
        "peak_cache_size": max(sizes) if sizes else 0.0,
        "final_cache_size": sizes[-1] if sizes else 0.0,
        "cpu_percent": total_cpu,
        "cpu_percent_by_daemon": {label: item["cpu_percent"] for label, item in proc.items()},
        "peak_rss_mb": peak_rss / 2**20,
        "bytes_written": written,
        "block_bytes_written": sum(item["write_bytes"] for item in proc.values()),
        "writes_per_s": update_rate,
        "points_on_disk": on_disk,
        "files": files,
        "points_lost": result.sent - on_disk,
        "time_to_disk": timings.get("time_to_disk"),
        **_file_times(timings, result, load_start),
        "creates": sum(creates.values()),
        "deferred_creates": sum(deferred.values()),
        "dropped_creates": sum(dropped.values()),
        "cache_overflow": sum(_sum_series(self_metrics, "cache.overflow").values()),
        "errors": result.errors,
        "log_tracebacks": {daemon.label: _tracebacks(daemon.log_path) for daemon in stack.daemons},
        "stop_seconds": timings.get("stop_took", {}),
        "killed": list(stack.killed),  # daemons killed after stop_timeout: losses are ours
        "pids": {d.label: d.proc.pid for d in stack.daemons if d.proc is not None},
        "profiles": [str(path.name) for _d, _p, path in spies if path.exists()],
        "cprofile": [str(d.profile_out) for d in stack.daemons
                     if d.profile_out is not None and d.profile_out.exists()],
        "active_seconds": active,
        "warmup_seconds": timings.get("warmup_seconds", 0.0),
        **timings.get("render", {}),
        "series": {
            "t0": load_start,
            "load_end": load_end,
            "end": stopped,
            "received": _per_second(received, interval),
            "committed": _per_second(committed, interval),
            "cache_size": [[t, v] for t, v in cache_size.items()],
            "update_ops": _per_second(updates, interval),
            # committed / updates over all caches (each cache's pointsPerUpdate summed
            # over several caches would be no ratio at all)
            "points_per_update": [[t, committed.get(t, 0.0) / v] for t, v in updates.items()
                                  if v > 0],
            "cpu": cpu_series,
            "rss": rss_series,
            "relay_queue": relay_queue,
        },
        "self_metrics": self_metrics,  # every daemon's self-metric series, as written
    }
    return row


def _file_times(timings: dict, result: LoadResult, load_start: float) -> dict:
    """How fast the names sent got their files while the point ran (before the stop,
    which may create the rest): files seen, creates a minute while settling (after the
    create limiter's first burst), and the seconds from the load's start until every
    file existed, measured or (when the run ended first) projected at that pace."""
    seen = timings.get("files_seen") or [(load_start, 0)]
    names = min(result.names, result.sent)
    (t0, f0), (t1, f1) = seen[0], seen[-1]
    if t1 - t0 < 5.0:  # too short a settle: the pace over the whole point
        t0, f0 = load_start, 0
    per_minute = (f1 - f0) / max(t1 - t0, 1e-6) * 60.0
    all_at = timings.get("all_files_at")
    out = {"files_before_stop": f1, "creates_per_minute": per_minute,
           "all_files_after_s": None if all_at is None else all_at - load_start,
           "all_files_projected_s": None}
    if all_at is None and per_minute > 0:
        out["all_files_projected_s"] = t1 - load_start + (names - f1) / per_minute * 60.0
    return out


def _tracebacks(path: Path) -> int:
    try:
        return path.read_text(errors="replace").count("Traceback (most recent call last)")
    except OSError:
        return 0


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _per_second(series: dict[float, float], interval: float) -> list[list[float]]:
    return [[stamp, value / interval] for stamp, value in series.items()]


def _cpu_series(samples: list[tuple[float, dict]]) -> list[list[float]]:
    out = []
    for (t0, a), (t1, b) in zip(samples, samples[1:], strict=False):
        if t1 > t0:
            out.append([t1, (b["cpu"] - a["cpu"]) / (t1 - t0) * 100.0])
    return out


def _peak_total_rss(samples: dict[str, list], start: float, end: float) -> float:
    """Largest sum of the daemons' RSS at one sampling moment."""
    totals: dict[int, float] = {}
    for series in samples.values():
        for position, (stamp, stats) in enumerate(series):
            if start - 1 <= stamp <= end + 1:
                totals[position] = totals.get(position, 0.0) + stats["rss"]
    return max(totals.values()) if totals else 0.0
