"""Helpers for tests that run real daemons on loopback."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from carbon.playground.ports import free_port  # noqa: F401 - the tests' port chooser

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"
TEST_SCHEMAS = "[carbon]\npattern = ^carbon\\.\nretentions = 60:90d\n\n" \
    "[default]\npattern = .*\nretentions = 60s:1d\n"


def wait_for(predicate: Callable[[], object], timeout: float = 20.0,
             interval: float = 0.05, what: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("timed out after %.0fs waiting for %s" % (timeout, what))


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def send_tcp(port: int, data: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)


def pickle_frame(points: list) -> bytes:
    payload = pickle.dumps(points, protocol=2)
    return struct.pack("!I", len(payload)) + payload


def carbonlink(port: int, request: dict) -> dict:
    payload = pickle.dumps(request, protocol=2)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack("!I", len(payload)) + payload)
        header = b""
        while len(header) < 4:
            chunk = sock.recv(4 - len(header))
            assert chunk, "carbonlink closed the connection"
            header += chunk
        (length,) = struct.unpack("!I", header)
        body = b""
        while len(body) < length:
            chunk = sock.recv(length - len(body))
            assert chunk
            body += chunk
    return pickle.loads(body)


class CarbonInstance:
    """A graphite root in a temp dir with our conf/ files and free loopback ports."""

    def __init__(self, root: Path, program: str = "carbon-cache", section: str = "cache",
                 **settings: object) -> None:
        self.root = root
        self.program = program
        self.conf = root / "conf"
        self.storage = root / "storage"
        self.conf.mkdir(parents=True, exist_ok=True)
        # Small files for tests (conf/ ships carbon's 60s:1d,5m:30d,1h:3y).
        (self.conf / "storage-schemas.conf").write_text(TEST_SCHEMAS)
        shutil.copy(CONF / "storage-aggregation.conf", self.conf / "storage-aggregation.conf")
        self.line_port = free_port()
        self.pickle_port = free_port()
        self.query_port = free_port()
        self.udp_port = free_port(socket.SOCK_DGRAM)
        base = {
            "LINE_RECEIVER_INTERFACE": "127.0.0.1", "LINE_RECEIVER_PORT": self.line_port,
            "PICKLE_RECEIVER_INTERFACE": "127.0.0.1", "PICKLE_RECEIVER_PORT": self.pickle_port,
            "CACHE_QUERY_INTERFACE": "127.0.0.1", "CACHE_QUERY_PORT": self.query_port,
            "UDP_RECEIVER_INTERFACE": "127.0.0.1", "UDP_RECEIVER_PORT": self.udp_port,
            "MAX_UPDATES_PER_SECOND": "inf", "CARBON_METRIC_INTERVAL": 0,
            "LOG_UPDATES": False, "LOG_CACHE_HITS": False,
        }
        base.update(settings)
        self.settings = base
        self.section = section
        self.write_conf()
        self.proc: subprocess.Popen | None = None

    def write_conf(self, extra: str = "") -> None:
        lines = ["[%s]" % self.section]
        lines += ["%s = %s" % (k, v) for k, v in self.settings.items()]
        (self.conf / "carbon.conf").write_text("\n".join(lines) + "\n" + extra)

    @property
    def script(self) -> list[str]:
        return [sys.executable, "-m", "carbon.daemon", self.program]

    def cli(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        env = dict(os.environ, GRAPHITE_ROOT=str(self.root), PYTHONPATH=str(ROOT))
        return subprocess.run(self.script + list(args), env=env, capture_output=True,
                              text=True, timeout=timeout)

    def start_foreground(self, *args: str) -> subprocess.Popen:
        env = dict(os.environ, GRAPHITE_ROOT=str(self.root), PYTHONPATH=str(ROOT))
        log = open(self.root / "stdout.log", "w")
        self.proc = subprocess.Popen(self.script + ["--nodaemon", *args, "start"], env=env,
                                     stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: self.proc.poll() is not None or port_open(self.line_port),
                 what="daemon to listen")
        assert self.proc.poll() is None, self.output()
        return self.proc

    def output(self) -> str:
        path = self.root / "stdout.log"
        return path.read_text() if path.exists() else ""

    def terminate(self, timeout: float = 60) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def whisper_path(self, metric: str) -> Path:
        return self.storage / "whisper" / (metric.replace(".", "/") + ".wsp")


def read_whisper(path: Path, start: int, end: int) -> dict:
    """{timestamp: value} of the non-empty slots, or {} while the file does not exist yet
    or is still being created by the daemon (a half-written header is not an error)."""
    import whisper

    try:
        (first, _end, step), values = whisper.fetch(str(path), start, end)
    except (OSError, whisper.WhisperException, ValueError, IndexError, struct.error):
        return {}
    return {first + i * step: v for i, v in enumerate(values) if v is not None}


class MemoryBackend:
    """A duck-typed storage backend plugin in memory, with the base calls only and
    ``write`` without ``now`` (as carbon 1.1.10's TimeSeriesDatabase.write); it keeps
    no files."""

    def __init__(self, settings: object) -> None:
        self.files: dict[str, dict[float, float]] = {}
        self.creates = 0

    def exists(self, metric: str) -> bool:
        return metric in self.files

    def create(self, metric, retentions, xfilesfactor, aggregation_method) -> None:
        if metric in self.files:
            raise FileExistsError(metric)
        self.creates += 1
        self.files[metric] = {}

    def write(self, metric, datapoints) -> int:
        self.files[metric].update(datapoints)
        return 0

    def get_metadata(self, metric, key):
        return "average"

    def set_metadata(self, metric, key, value):
        return "average"
