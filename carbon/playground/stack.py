"""A loopback stack for one sweep point: generated configs, real daemons, free ports."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carbon.playground.ports import free_port
from carbon.playground.scenario import REPEAT, Scenario
from carbon.storage.whisper_create import CreateOptions, create_many, file_plan

PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent
PROGRAMS = {"cache": "carbon-cache", "relay": "carbon-relay", "aggregator": "carbon-aggregator"}
INSTANCES = "abcdefghijklmnopqrstuvwxyz"
PRECREATE_BATCH = 256  # files created (and open) at once: well below any fd limit
@dataclass
class Daemon:
    """One daemon of the stack: its root, ports and process."""

    kind: str  # cache, relay or aggregator
    instance: str
    root: Path
    ports: dict[str, int]
    settings: dict[str, str]
    proc: subprocess.Popen | None = None
    profile_out: Path | None = None

    @property
    def label(self) -> str:
        return "%s-%s" % (self.kind, self.instance)

    @property
    def data_dir(self) -> Path:
        return self.root / "storage" / "whisper"

    @property
    def conf_dir(self) -> Path:
        return self.root / "conf"

    @property
    def log_path(self) -> Path:
        return self.root / "daemon.log"

    def write_conf(self, settings: dict[str, str] | None = None) -> None:
        if settings is not None:
            self.settings = settings
        lines = ["[%s]" % self.kind] + ["%s = %s" % item for item in self.settings.items()]
        (self.conf_dir / "carbon.conf").write_text("\n".join(lines) + "\n")


@dataclass
class Stack:
    """The daemons of one sweep point, entry first (where the load goes)."""

    daemons: list[Daemon] = field(default_factory=list)
    subject: str = "ours"
    render: Any = None
    killed: list = field(default_factory=list)  # labels of daemons stop() had to SIGKILL
    load_retention: tuple[int, int] = (1, 1)  # (step, points) of the load's files
    precreated: bool = False  # the load's files were made by ``precreate``

    @property
    def caches(self) -> list[Daemon]:
        return [daemon for daemon in self.daemons if daemon.kind == "cache"]

    @property
    def entry(self) -> Daemon:
        return self.daemons[0]

    def stop(self, timeout: float) -> dict[str, float]:
        """SIGTERM every daemon (entry first, so upstream flushes into the caches), wait
        up to ``timeout`` seconds each, then SIGKILL. Returns seconds each took."""
        took: dict[str, float] = {}
        if self.render is not None and self.render.poll() is None:
            self.render.terminate()
            try:
                self.render.wait(10)
            except subprocess.TimeoutExpired:
                self.render.kill()
                self.render.wait(10)
        for daemon in self.daemons:
            proc = daemon.proc
            if proc is None or proc.poll() is not None:
                continue
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
                self.killed.append(daemon.label)
            took[daemon.label] = time.monotonic() - started
        return took


SCHEMAS = """[carbon]
pattern = ^carbon\\.
retentions = {interval}s:{carbon_points}

[load]
pattern = .*
retentions = {step}s:{load_points}
"""

AGGREGATION = """[default]
pattern = .*
xFilesFactor = 0
aggregationMethod = average
"""


def load_points_needed(scenario: Scenario, rounds: int) -> int:
    """Archive size that holds every round sent and a generous lag behind now."""
    step = scenario.load.step
    lag = scenario.load.duration + scenario.settings.settle_timeout + 600
    return max(rounds + 10, int(lag // step) + rounds + 10)


def build(scenario: Scenario, point: dict[str, Any], workdir: Path, rounds: int,
          reference: Path | None = None) -> Stack:
    """Config folders for the point's daemons (not started)."""
    topo = scenario.topology
    subject = point["subject"]
    interval = scenario.settings.interval
    base = {
        "USER": "", "LOG_UPDATES": "False", "LOG_CREATES": "False", "LOG_CACHE_HITS": "False",
        "LOG_CACHE_QUEUE_SORTS": "False", "ENABLE_UDP_LISTENER": "False",
        "CARBON_METRIC_INTERVAL": "%g" % interval, "ENABLE_LOGROTATION": "False",
        "LINE_RECEIVER_INTERFACE": "127.0.0.1", "PICKLE_RECEIVER_INTERFACE": "127.0.0.1",
        "CACHE_QUERY_INTERFACE": "127.0.0.1", "ENABLE_TAGS": "False",
        # stopping is not measured: drain at full speed (a scenario may set it)
        "MAX_UPDATES_PER_SECOND_ON_SHUTDOWN": "inf",
    }
    base.update(scenario.carbon)
    for key, value in point.items():
        if key not in ("disk", "subject", REPEAT):
            base[key] = str(value)
    schemas = SCHEMAS.format(interval=int(max(1, interval)),
                             carbon_points=int(7200 / max(1, interval)),
                             step=scenario.load.step,
                             load_points=load_points_needed(scenario, rounds))
    stack = Stack(subject=subject, load_retention=(
        scenario.load.step, load_points_needed(scenario, rounds)))
    caches = []
    for index in range(topo.caches):
        ports = {"line": free_port(), "pickle": free_port(), "query": free_port()}
        settings = dict(base, LINE_RECEIVER_PORT=str(ports["line"]),
                        PICKLE_RECEIVER_PORT=str(ports["pickle"]),
                        CACHE_QUERY_PORT=str(ports["query"]))
        if point.get("disk", "none") != "none":
            settings["DATABASE"] = "emulated-disk"  # carbon 1.1.10 too, through refshim
        caches.append(Daemon("cache", INSTANCES[index], workdir / ("cache-" + INSTANCES[index]),
                             ports, settings))
    upstream = ["127.0.0.1:%d:%s" % (c.ports["pickle"], c.instance) for c in caches]
    front: list[Daemon] = []
    if topo.relay:
        ports = {"line": free_port(), "pickle": free_port()}
        settings = dict(base, LINE_RECEIVER_PORT=str(ports["line"]),
                        PICKLE_RECEIVER_PORT=str(ports["pickle"]),
                        RELAY_METHOD="consistent-hashing", DESTINATIONS=", ".join(upstream))
        relay = Daemon("relay", "a", workdir / "relay-a", ports, settings)
        front.append(relay)
        upstream = ["127.0.0.1:%d:a" % ports["pickle"]]
    if topo.aggregator:
        ports = {"line": free_port(), "pickle": free_port()}
        settings = dict(base, LINE_RECEIVER_PORT=str(ports["line"]),
                        PICKLE_RECEIVER_PORT=str(ports["pickle"]),
                        DESTINATIONS=", ".join(upstream), FORWARD_ALL="True")
        front.insert(0, Daemon("aggregator", "a", workdir / "aggregator-a", ports, settings))
    stack.daemons = front + caches
    for daemon in stack.daemons:
        daemon.conf_dir.mkdir(parents=True, exist_ok=True)
        daemon.data_dir.mkdir(parents=True, exist_ok=True)
        (daemon.conf_dir / "storage-schemas.conf").write_text(schemas)
        (daemon.conf_dir / "storage-aggregation.conf").write_text(AGGREGATION)
        (daemon.conf_dir / "aggregation-rules.conf").write_text(
            "\n".join(topo.aggregation_rules) + "\n")
        for name in ("relay-rules.conf", "rewrite-rules.conf"):
            (daemon.conf_dir / name).write_text("")
        write_disk_profile(daemon, point.get("disk", "none"))
        daemon.write_conf()
    return stack


def precreate(scenario: Scenario, stack: Stack) -> int | None:
    """Create every load metric's whisper file (as the cache would: the load's schema,
    xFilesFactor 0, average) before the daemons start: the steady state a warm-up
    reaches, without the creates' cost on an emulated disk. None when the names' files
    cannot be known here (tagged names, or several caches behind a hashing relay)."""
    load = scenario.load
    if len(stack.caches) != 1 or ";" in load.pattern:
        return None
    header, total = file_plan([stack.load_retention], 0.0, "average")
    root = stack.caches[0].data_dir
    items = [(str(root / (load.name(index).replace(".", os.sep) + ".wsp")), header, total)
             for index in range(load.metrics)]
    made = 0
    for first in range(0, len(items), PRECREATE_BATCH):  # each batch's files stay open
        results = create_many(items[first:first + PRECREATE_BATCH], CreateOptions())
        for result in results:
            if not isinstance(result, Exception):
                os.close(result.fd)
                made += 1
        for result in results:
            if isinstance(result, Exception):
                raise RuntimeError("cannot create the load's files: %s" % result)
    return made


def write_disk_profile(daemon: Daemon, disk: str) -> None:
    (daemon.conf_dir / "disk-profile.conf").write_text("[disk]\nprofile = %s\n" % disk)


def command(daemon: Daemon, subject: str, reference: Path | None,
            profile_to: Path | None) -> list[str]:
    program = PROGRAMS[daemon.kind]
    args = ["--config", str(daemon.conf_dir / "carbon.conf"), "--instance", daemon.instance,
            "--nodaemon", "start"]
    if subject == "reference":
        assert reference is not None
        python = str(reference / "bin" / "python")
        script = str(reference / "bin" / (program + ".py"))
        if profile_to is not None:  # twistd dumps the profile when its reactor stops
            args = ["--profile", str(profile_to), "--profiler", "cprofile"] + args
        return [python, script] + args
    head = [sys.executable]
    if profile_to is not None:
        head += ["-m", "cProfile", "-o", str(profile_to)]
    return head + ["-m", "carbon.daemon", program] + args


def start(stack: Stack, reference: Path | None, profile_dir: Path | None,
          timeout: float = 60.0) -> None:
    """Start the caches first, then the relay and aggregator; wait for every port."""
    env = dict(os.environ)
    if stack.subject == "ours":
        env["PYTHONPATH"] = os.pathsep.join(
            [str(PACKAGE_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    else:  # carbon 1.1.10: our disk model through its own plugin registry
        env["PYTHONPATH"] = str(Path(__file__).resolve().parent / "refshim")
        env["PLAYGROUND_DISK_MODEL"] = str(PACKAGE_ROOT / "carbon" / "storage" / "disk_model.py")
    for daemon in reversed(stack.daemons):
        env["GRAPHITE_ROOT"] = str(daemon.root)
        profile_to = None
        if profile_dir is not None and not shutil.which("py-spy"):
            profile_to = daemon.root / "cprofile.out"
            daemon.profile_out = profile_to
        log = open(daemon.log_path, "ab")
        daemon.proc = subprocess.Popen(command(daemon, stack.subject, reference, profile_to),
                                       env=env, stdout=log, stderr=subprocess.STDOUT,
                                       cwd=str(daemon.root), start_new_session=True)
        log.close()
        wait_port(daemon, timeout)


def start_render(stack: Stack, workdir: Path) -> str:
    """The render app (``graphite-render``) over the first cache's files and
    every cache's carbonlink; returns its base URL."""
    caches = stack.caches
    settings = workdir / "render_settings.py"
    settings.write_text("WHISPER_DIR = %r\nCARBONLINK_HOSTS = %r\n" % (
        str(caches[0].data_dir),
        ["127.0.0.1:%d:%s" % (cache.ports["query"], cache.instance) for cache in caches]))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PACKAGE_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    # the render app's own command (carbon never imports the webapp)
    command = shutil.which("graphite-render", path=os.path.dirname(sys.executable))
    if command is None:
        raise RuntimeError("render = true needs the graphite-render command next to %s"
                           % sys.executable)
    log = open(workdir / "render.log", "ab")
    stack.render = subprocess.Popen([command, "--config", str(settings), "--port", "0"],
                                    env=env,
                                    stdout=subprocess.PIPE, stderr=log, cwd=str(workdir),
                                    start_new_session=True)
    log.close()
    line = stack.render.stdout.readline().decode()
    if "listening on " not in line:
        raise RuntimeError("the render app did not start:\n%s" % tail(workdir / "render.log"))
    return line.strip().rsplit(" ", 1)[-1].rstrip("/")


def wait_port(daemon: Daemon, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    port = daemon.ports["line"]
    while time.monotonic() < deadline:
        assert daemon.proc is not None
        if daemon.proc.poll() is not None:
            raise RuntimeError("%s exited with %s at start:\n%s" % (
                daemon.label, daemon.proc.returncode, tail(daemon.log_path)))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("%s did not open port %d in %.0f s" % (daemon.label, port, timeout))


def tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
