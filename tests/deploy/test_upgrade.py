"""Upgrade a live carbon 1.1.10 host to ours, and roll it back (docs/upgrading.md).

One host (a GRAPHITE_ROOT) set up as an operator has it: carbon 1.1.10's own
``carbon.conf.example`` (ports moved to free loopback ones), storage schemas with three
retentions, and a whisper tree made before anything runs (files with history, for three
schemas and two aggregation methods). carbon-cache 1.1.10 (the reference venv) runs on
it, started with its own command line (``carbon-cache.py --instance=a start``,
daemonized, pidfile in STORAGE_DIR), and takes a bounded live load: full-precision
values for 360 metrics (40 of them new, so both daemons create files) over four
concurrent connections; the sender retries refused connections and resends any batch
whose connection did not close cleanly (tests/deploy/acked_load.py says why a clean
close means "read"). Then:

1. upgrade: the flow into carbon 1.1.10 is paused until its cache is empty (below),
   it is stopped (``carbon-cache.py stop``: SIGTERM) and ours is started with the same
   command line on the same carbon.conf, storage and ports; the sender goes on
   (connections refused meanwhile are retried);
2. rollback: ours is stopped the same way under the load (no pause: it reads what
   senders wrote and writes all of it), and carbon 1.1.10 is started again;
3. the load ends; once carbon 1.1.10 has written it, carbon 1.1.10 is stopped.

Every acknowledged point must be in whisper with the value sent (files read directly),
counted per direction; the history made before is untouched; the files each daemon
created have the schema carbon.conf gives; our journal folder holds no segment after
our clean stop (what carbon 1.1.10 would not replay).

carbon 1.1.10 loses points on SIGTERM when its writer thread is asleep: it writes
until its cache is empty, sleeps a second, and exits at shutdown without another pass,
so whatever it read during that second is gone (measured here: docs/upgrading.md). An
operator stops the flow into it first; so does this test before each SIGTERM to carbon
1.1.10 (``hold``: no new connection until the switch is done, the ones open finish),
and waits until carbonlink shows its cache empty. ``UPGRADE_NO_HOLD=1`` skips that
to measure the loss.

Then the render app: graphite-web 1.1.10 (Python 3.9 venv) answers /render?format=json
for a set of targets on a local_settings.py; it is stopped, graphite-render starts on
the same file and port and must answer the same; then back to graphite-web, again the
same.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import whisper

from tests.deploy.acked_load import (AckedSender, LegCount, Metric, count_stored, deliver,
                                     make_batches, whisper_path)
from tests.interop.reference import GraphiteWeb, carbon_venv, reference_env
from tests.support import ROOT, carbonlink, free_port, port_open, wait_for
from tests.webapp.helpers import stop_server

pytestmark = pytest.mark.system

SCHEMAS = """[carbon]
pattern = ^carbon\\.
retentions = 60:90d

[fine]
pattern = ^upg\\.fine\\.
retentions = 1s:2h,1m:1d

[coarse]
pattern = ^upg\\.coarse\\.
retentions = 10s:6h,1m:7d

[default]
pattern = .*
retentions = 60s:1d,5m:30d,1h:3y
"""
# (archives, finest step) per schema, as whisper.create takes them
ARCHIVES = {"fine": [(1, 7200), (60, 1440)], "coarse": [(10, 2160), (60, 10080)],
            "default": [(60, 1440), (300, 8640), (3600, 26280)]}
PER_METRIC = 250  # points a metric gets from the load
BATCH_POINTS = 450  # lines a connection carries
RATE = 8.0  # batches a second (3,600 points a second)
CACHE_KEYS = ("LINE_RECEIVER", "PICKLE_RECEIVER", "CACHE_QUERY", "UDP_RECEIVER")


def aggregation_of(name: str) -> tuple[str, float]:
    """carbon 1.1.10's example storage-aggregation.conf for ``name``."""
    if name.endswith(".min"):
        return "min", 0.1
    if name.endswith(".max"):
        return "max", 0.1
    if name.endswith(".count"):
        return "max", 0.0
    return "average", 0.5


def host_metrics(now: int) -> tuple[list[Metric], dict[str, str]]:
    """The load's metrics and the schema each one falls under; existing ones first."""
    metrics: list[Metric] = []
    schema: dict[str, str] = {}
    layout = [("fine", "upg.fine.h%02d.cpu%d", 1, now - 3000),
              ("coarse", "upg.coarse.h%02d.disk%d", 10, (now - 4 * 3600) // 10 * 10),
              ("default", "upg.wide.h%02d.req%d", 60, (now - 20 * 3600) // 60 * 60)]
    for kind, pattern, step, first in layout:
        for i in range(120 if kind == "default" else 100):
            name = pattern % (i // 10, i % 10)
            if kind == "default":  # a third of them under other aggregation rules
                name += ("", ".count", ".max")[i % 3]
            metrics.append(Metric(name, step, first))
            schema[name] = kind
    for i in range(40):  # made by whichever daemon first sees them
        name = "upg.new.h%02d.val%d" % (i // 10, i % 10)
        metrics.append(Metric(name, 60, (now - 20 * 3600) // 60 * 60))
        schema[name] = "default"
    return metrics, schema


def history_of(metric: Metric, now: int) -> list[tuple[int, float]]:
    """Points an existing file holds before the load: older than the load's, at the
    metric's step, the values a function of the timestamp."""
    span = {1: 2900, 10: 3600, 60: 3 * 3600}[metric.step]
    count = 290 if metric.step == 1 else span // metric.step
    spacing = 10 if metric.step == 1 else metric.step
    end = metric.first - 100 if metric.step == 1 else metric.first - metric.step
    return [(end - k * spacing, (end - k * spacing) / 7.0) for k in range(count)]


def carbon_conf(example: str, ports: dict[str, int]) -> str:
    """carbon 1.1.10's example carbon.conf with [cache] on 127.0.0.1 and our ports."""
    out, section = [], ""
    for line in example.splitlines():
        head = re.match(r"^\[(.+)\]\s*$", line)
        if head:
            section = head.group(1)
        key = re.match(r"^([A-Z_]+)\s*=", line)
        if section == "cache" and key:
            name = key.group(1)
            for prefix in CACHE_KEYS:
                if name == prefix + "_INTERFACE":
                    line = "%s = 127.0.0.1" % name
                elif name == prefix + "_PORT":
                    line = "%s = %d" % (name, ports[prefix])
        out.append(line)
    return "\n".join(out) + "\n"


class Host:
    """A graphite host (GRAPHITE_ROOT) whose carbon-cache instance ``a`` is carbon 1.1.10
    or ours, each started and stopped with its own command line."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.venv = carbon_venv()
        self.conf = root / "conf"
        self.storage = root / "storage"
        self.data_dir = self.storage / "whisper"
        self.conf.mkdir(parents=True)
        self.data_dir.mkdir(parents=True)
        self.ports: dict[str, int] = {}
        self.new_ports()
        (self.conf / "storage-schemas.conf").write_text(SCHEMAS)
        shutil.copy(self.venv / "conf" / "storage-aggregation.conf.example",
                    self.conf / "storage-aggregation.conf")
        self.pidfile = self.storage / "carbon-cache-a.pid"
        self.log_dir = self.storage / "log" / "carbon-cache" / "carbon-cache-a"
        self.pids: list[int] = []  # every daemon this host started (cleanup)
        self.running: tuple[str, int] | None = None
        self.events: list[str] = []
        self.spans: dict[str, list[float]] = {}  # impl -> [listening since, stop sent]

    def new_ports(self) -> None:
        """carbon.conf: carbon 1.1.10's example with free loopback ports in [cache]."""
        self.ports = {prefix: free_port() for prefix in CACHE_KEYS}
        example = (self.venv / "conf" / "carbon.conf.example").read_text()
        (self.conf / "carbon.conf").write_text(carbon_conf(example, self.ports))

    def first_start(self, impl: str) -> None:
        """``start``, on other ports if another process took one of them meanwhile (the
        machine is shared; later starts must reuse the ports, as an upgrade does)."""
        for _attempt in range(3):
            try:
                self.start(impl)
                return
            except AssertionError as exc:
                if "already in use" not in str(exc) + self.console():
                    raise
                self.events.append("a port was taken by another process: new ports")
                shutil.rmtree(self.log_dir, ignore_errors=True)
                self.new_ports()
        self.start(impl)

    @property
    def line_port(self) -> int:
        return self.ports["LINE_RECEIVER"]

    def command(self, impl: str, action: str) -> subprocess.CompletedProcess:
        if impl == "reference":
            argv = [str(self.venv / "bin" / "python"), str(self.venv / "bin" / "carbon-cache.py")]
            env = reference_env(GRAPHITE_ROOT=str(self.root))
            cwd = str(self.venv)  # our own ``carbon`` package must not shadow carbon 1.1.10
        else:
            argv = [sys.executable, "-m", "carbon.daemon", "carbon-cache"]
            env = dict(os.environ, GRAPHITE_ROOT=str(self.root), PYTHONPATH=str(ROOT))
            cwd = str(self.root)
        return subprocess.run(argv + ["--instance=a", action], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=60)

    def start(self, impl: str) -> float:
        """``carbon-cache.py --instance=a start``; seconds until it listens."""
        began = time.monotonic()
        done = self.command(impl, "start")
        assert done.returncode == 0, (impl, done.stdout, done.stderr, self.console())

        def written_pid() -> int | None:
            try:
                return int(self.pidfile.read_text().strip())
            except (FileNotFoundError, ValueError):
                return None

        pid = wait_for(written_pid, timeout=60, what="%s's pidfile" % impl)
        assert isinstance(pid, int)
        self.pids.append(pid)
        # the listener must be this daemon's (a port taken by another process meanwhile
        # would answer the sender too); carbon 1.1.10 daemonizes before it binds
        wait_for(lambda: listens_on(pid, self.line_port) or _zombie(pid), timeout=60,
                 what="%s (pid %d) to listen on port %d" % (impl, pid, self.line_port))
        assert not _zombie(pid), "%s exited at start: %s" % (impl, self.console())
        self.running = (impl, pid)
        self.spans[impl] = [time.monotonic(), float("inf")]
        took = time.monotonic() - began
        self.events.append("%s started as pid %d, listening after %.2f s" % (impl, pid, took))
        return took

    def stop(self) -> float:
        """``carbon-cache.py --instance=a stop`` (SIGTERM; it does not wait, in either
        implementation) and wait until the process is gone; seconds it took."""
        assert self.running is not None
        impl, pid = self.running
        began = time.monotonic()
        self.spans[impl][1] = began
        done = self.command(impl, "stop")
        assert done.returncode == 0 and "Sending kill signal to pid %d" % pid in done.stdout, (
            done.stdout, done.stderr)
        wait_gone(pid, "%s (pid %d) to exit" % (impl, pid))
        self.running = None
        took = time.monotonic() - began
        self.events.append("%s stopped (SIGTERM) after %.2f s" % (impl, took))
        return took

    def cached_points(self, names: list[str]) -> int:
        """Points the running daemon holds (carbonlink cache-query-bulk)."""
        answer = carbonlink(self.ports["CACHE_QUERY"],
                            {"type": "cache-query-bulk", "metrics": names})
        return sum(len(points) for points in answer["datapointsByMetric"].values())

    def console(self) -> str:
        path = self.log_dir / "console.log"
        return path.read_text()[-3000:] if path.exists() else "(no console.log)"

    def journal_segments(self) -> list[str]:
        folder = self.storage / "cache-journal" / "carbon-cache-a"
        return sorted(p.name for p in folder.glob("*.journal")) if folder.exists() else []

    def kill_all(self) -> None:
        """Cleanup: SIGKILL any daemon this host started that is still running."""
        for pid in self.pids:
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as handle:
                    if b"carbon-cache" not in handle.read():
                        continue
                os.kill(pid, signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError):
                pass


def listens_on(pid: int, port: int) -> bool:
    """True if ``pid`` holds the socket listening on 127.0.0.1:``port``."""
    inodes = set()
    with open("/proc/net/tcp") as table:
        for row in table.read().splitlines()[1:]:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.split(":")[1], 16) == port:
                inodes.add("socket:[%s]" % inode)
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except FileNotFoundError:
        return False
    for fd in fds:
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) in inodes:
                return True
        except FileNotFoundError:
            continue
    return False


def wait_gone(pid: int, what: str) -> None:
    wait_for(lambda: not os.path.exists("/proc/%d" % pid) or _zombie(pid), timeout=120,
             interval=0.02, what=what)


def _zombie(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def make_tree(host: Host, metrics: list[Metric], schema: dict[str, str],
              now: int) -> dict[str, list[tuple[int, float]]]:
    """The existing whisper tree: every metric but upg.new.* with its history."""
    history = {}
    for metric in metrics:
        if metric.name.startswith("upg.new."):
            continue
        path = whisper_path(host.data_dir, metric.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        method, xff = aggregation_of(metric.name)
        whisper.create(str(path), ARCHIVES[schema[metric.name]], xFilesFactor=xff,
                       aggregationMethod=method)
        points = history_of(metric, now)
        whisper.update_many(str(path), points)
        history[metric.name] = points
    return history


def history_intact(host: Host, history: dict[str, list[tuple[int, float]]]) -> int:
    """Points of the history that are no longer there with their value."""
    from tests.support import read_whisper
    missing = 0
    for name, points in history.items():
        stamps = [t for t, _v in points]
        stored = read_whisper(whisper_path(host.data_dir, name), min(stamps) - 1,
                              max(stamps) + 1)
        missing += sum(stored.get(t) != v for t, v in points)
    return missing


def quiesce(host: Host, sender: AckedSender, names: list[str]) -> float:
    """What an operator does before stopping carbon 1.1.10: no new data flows in (the
    sender holds new connections; the open ones finish), and its writer has emptied
    the cache (carbonlink shows nothing cached). Seconds it took."""
    began = time.monotonic()
    sender.hold()
    wait_for(sender.idle, timeout=30, what="the open connections to finish")
    wait_for(lambda: host.cached_points(names) == 0, timeout=60, interval=0.1,
             what="carbon 1.1.10's cache to be empty")
    return time.monotonic() - began


def render_targets(now: int) -> list[dict[str, Any]]:
    """/render?format=json requests over the host's tree: plain paths, wildcards,
    functions, consolidation, across the three schemas and the files either daemon
    made."""
    day = {"from": now - 22 * 3600, "until": now}
    return [
        {"target": "upg.fine.h00.cpu*", "from": now - 3100, "until": now - 2500},
        {"target": ["upg.coarse.h01.disk1", "upg.coarse.h01.disk2"],
         "from": now - 4 * 3600 - 600, "until": now - 3600},
        dict(day, target="sumSeries(upg.wide.h0*.req*)"),
        dict(day, target="upg.new.*.val1"),
        dict(day, target="averageSeries(upg.wide.*.*.count)", maxDataPoints=200),
        {"target": "movingAverage(upg.fine.h02.cpu3,10)", "from": now - 3100,
         "until": now - 2700},
        {"target": "aliasByNode(upg.coarse.h03.*,2,3)", "from": now - 5 * 3600,
         "until": now - 3 * 3600},
        dict(day, target="summarize(upg.wide.h05.*.max,'1h','sum')"),
        dict(day, target="scale(upg.new.h02.val7,0.5)"),
    ]


def render_answers(port: int, requests: list[dict[str, Any]]) -> list[tuple[int, bytes]]:
    answers = []
    for params in requests:
        url = "http://127.0.0.1:%d/render?%s" % (port, urllib.parse.urlencode(
            dict(params, format="json"), doseq=True))
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                answers.append((response.status, response.read()))
        except urllib.error.HTTPError as err:
            answers.append((err.code, err.read()))
    return answers


class RenderApp:
    """Our render app (graphite-render) on a graphite-web local_settings.py."""

    def __init__(self, settings_file: Path, port: int, log: Path) -> None:
        self.log = open(log, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "webapp.server", "--config", str(settings_file),
             "--bind", "127.0.0.1", "--port", str(port)],
            env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=str(ROOT), stdout=self.log,
            stderr=subprocess.STDOUT)
        self.path = log
        try:
            wait_for(lambda: self.proc.poll() is not None or port_open(port), timeout=60,
                     what="graphite-render to listen")
        except AssertionError:
            self.stop()
            raise
        assert self.proc.poll() is None, log.read_text()

    def stop(self) -> None:
        stop_server(self.proc)
        self.log.close()


def switch_render_apps(host: Host, folder: Path, now: int) -> list[str]:
    """graphite-web 1.1.10 on a local_settings.py and a port, then graphite-render on
    the same file and port, then graphite-web again: the same answers each time."""
    port = free_port()
    settings = dict(STORAGE_DIR=str(host.storage), WHISPER_DIR=str(host.data_dir) + "/",
                    CARBONLINK_HOSTS=["127.0.0.1:%d:a" % host.ports["CACHE_QUERY"]],
                    DATABASES={"default": {"NAME": str(host.storage / "graphite.db"),
                                           "ENGINE": "django.db.backends.sqlite3"}})
    requests = render_targets(now)
    rounds = []
    settings_file: Path | None = None  # graphite-web's local_settings.py, written once
    for name in ("graphite-web 1.1.10", "graphite-render", "graphite-web 1.1.10 again"):
        began = time.monotonic()
        server: GraphiteWeb | RenderApp
        if settings_file is None:
            server = GraphiteWeb(folder, port=port, **settings)
            settings_file = server.settings_file
        elif name == "graphite-render":
            server = RenderApp(settings_file, port, folder / "graphite-render.log")
        else:  # the same file again (graphite-web writes it from the same settings)
            server = GraphiteWeb(folder, port=port, **settings)
            assert server.settings_file == settings_file
        started = time.monotonic() - began
        try:
            answers = render_answers(port, requests)
        finally:
            server.stop()
        rounds.append((name, started, answers))
    (first, _, reference), (_, _, ours), (_, _, again) = rounds
    assert all(status == 200 for status, _body in reference), reference
    series = sum(len(json.loads(body)) for _status, body in reference)
    points = sum(sum(v is not None for v, _t in s["datapoints"])
                 for _status, body in reference for s in json.loads(body))
    assert series >= len(requests) and points > 1000, (series, points)
    for i, params in enumerate(requests):
        assert ours[i] == reference[i], (params, ours[i][1][:300], reference[i][1][:300])
        assert again[i] == reference[i], params
    return ["render apps on one local_settings.py and port: %d requests, %d series, "
            "%d points, the same bytes from each (%s)" % (
                len(requests), series, points, ", ".join(
                    "%s up in %.1f s" % (name, took) for name, took, _a in rounds))]


def progress(sender: AckedSender, host: Host, batches: int, what: str) -> None:
    """Wait until ``batches`` are acknowledged; on a timeout say what the sender saw."""
    try:
        wait_for(lambda: len(sender.acked()) >= batches or sender.errors, timeout=180,
                 what=what)
    except AssertionError as exc:
        raise AssertionError("%s; %d acknowledged, connections %s, errors %s; %s\n%s" % (
            exc, len(sender.acked()), dict(sender.outcomes), sender.errors, host.events,
            host.console())) from None
    assert not sender.errors, sender.errors


def test_upgrade_from_live_carbon_1_1_10_and_back(tmp_path: Path) -> None:
    host = Host(tmp_path / "host")
    now = int(time.time())
    metrics, schema = host_metrics(now)
    names = [m.name for m in metrics]
    history = make_tree(host, metrics, schema, now)
    batches = make_batches(metrics, PER_METRIC, BATCH_POINTS)
    hold_reference = os.environ.get("UPGRADE_NO_HOLD", "") != "1"
    report: list[str] = []
    sender: AckedSender | None = None
    try:
        host.first_start("reference")
        sender = AckedSender(host.line_port, batches, RATE)
        sender.leg = "upgrade"
        sender.start()
        progress(sender, host, len(batches) // 4, "a quarter of the load acknowledged by "
                 "carbon 1.1.10")
        # 1. upgrade: carbon 1.1.10 -> ours, same conf, storage, ports, command line
        if hold_reference:
            report.append("carbon 1.1.10 quiesced in %.2f s" % quiesce(host, sender, names))
        host.stop()
        console = host.log_dir / "console.log"
        before = console.stat().st_size
        host.start("ours")
        sender.release()
        with open(console, "rb") as handle:  # ours appends to carbon 1.1.10's console.log
            handle.seek(before)
            ours_lines = handle.read().decode("utf-8", "replace")
        assert "Carbon" in ours_lines or "carbon" in ours_lines, ours_lines
        assert "WARNING" not in ours_lines, ours_lines  # the example carbon.conf is clean
        progress(sender, host, len(batches) * 6 // 10, "60% of the load acknowledged")
        # 2. rollback: ours -> carbon 1.1.10, under the load (no hold for ours)
        sender.leg = "rollback"
        host.stop()
        assert host.journal_segments() == [], "a clean stop left journal segments"
        host.start("reference")
        sender.join(300)
        assert not sender.errors, sender.errors
        assert sender.done()
        # 3. carbon 1.1.10 writes what it holds, then it is stopped (no load left)
        wait_for(lambda: host.cached_points(names) == 0, timeout=60, interval=0.2,
                 what="carbon 1.1.10 to write the rest")
        # 4. graphite-web 1.1.10 -> graphite-render -> graphite-web on that tree
        report += switch_render_apps(host, tmp_path / "web", now)
        host.stop()
        counts = []
        for leg in ("upgrade", "rollback"):
            acked = sender.acked(leg)
            good, wrong, examples = count_stored(host.data_dir, acked)
            counts.append(LegCount(leg, sum(len(b.points) for b in acked), good, wrong,
                                   examples))
        report += [c.line() for c in counts]
        ours_ran = host.spans["ours"]
        by_ours = [b for b in batches if b.acked_at is not None
                   and ours_ran[0] < b.acked_at < ours_ran[1]]
        report.append("batches acknowledged while ours ran: %d; batches that needed more "
                      "than one connection: %d; connections: %s" % (
                          len(by_ours), sum(b.attempts > 1 for b in batches),
                          dict(sender.outcomes)))
        report += host.events
        print("\n".join(report))
        assert len(by_ours) >= len(batches) // 4  # ours took a share of the live load
        for count in counts:
            assert count.sent > 0 and count.wrong == 0 and count.lost == 0, (
                count.line(), count.examples, report)
        assert sum(c.sent for c in counts) == PER_METRIC * len(metrics)
        assert history_intact(host, history) == 0
        for metric in metrics:  # files made by either daemon follow the host's schemas
            info = whisper.info(str(whisper_path(host.data_dir, metric.name)))
            method, xff = aggregation_of(metric.name)
            assert [(a["secondsPerPoint"], a["points"]) for a in info["archives"]] == \
                ARCHIVES[schema[metric.name]], metric.name
            assert info["aggregationMethod"] == method, metric.name
            assert info["xFilesFactor"] == pytest.approx(xff), metric.name  # a float32
    finally:
        if sender is not None:
            sender.hold()
        host.kill_all()


def test_sigterm_just_after_a_read_carbon_loses_it_ours_keeps_it(tmp_path: Path) -> None:
    """Why the upgrade stops the flow into carbon 1.1.10 first. Its writer thread writes
    until the cache is empty, then sleeps a second; SIGTERM stops the reactor, and the
    writer, on waking, sees the reactor stopped and returns without another pass. A
    batch read (acknowledged) while it sleeps is lost. The same sequence against ours
    keeps every point (read -> journal -> drained at SIGTERM)."""
    now = int(time.time())
    metrics = [Metric("sigterm.m%d" % i, 60, (now - 20 * 3600) // 60 * 60) for i in range(20)]
    lost = {}
    for impl in ("reference", "ours"):
        for attempt in range(3):  # the writer could wake in the few ms before the signal
            lost[impl] = sigterm_just_after_a_read(
                Host(tmp_path / ("%s-%d" % (impl, attempt))), impl, metrics)
            if impl == "ours" or lost[impl]:
                break
    print("SIGTERM just after a read: carbon 1.1.10 lost %d of %d points, ours %d"
          % (lost["reference"], 2 * len(metrics), lost["ours"]))
    assert lost["reference"] == len(metrics)  # the whole second batch
    assert lost["ours"] == 0


def sigterm_just_after_a_read(host: Host, impl: str, metrics: list[Metric]) -> int:
    """One batch written, a second one read, SIGTERM at once: points lost."""
    names = [m.name for m in metrics]
    batches = make_batches(metrics, 2, len(metrics))  # one point a metric a batch
    try:
        host.first_start(impl)
        assert deliver(host.line_port, batches[0].payload, 0.0) is None
        # the writer wrote it and went to sleep ...
        wait_for(lambda: host.cached_points(names) == 0 and all(
            whisper_path(host.data_dir, n).exists() for n in names), timeout=30,
            what="the first batch written")
        time.sleep(0.1)
        # ... a second batch is read (acknowledged), and SIGTERM follows at once
        assert deliver(host.line_port, batches[1].payload, 0.0) is None
        assert host.running is not None
        pid = host.running[1]
        os.kill(pid, signal.SIGTERM)
        wait_gone(pid, "%s to exit" % impl)
        good, wrong, _examples = count_stored(host.data_dir, batches)
    finally:
        host.kill_all()
    assert wrong == 0
    return 2 * len(metrics) - good
