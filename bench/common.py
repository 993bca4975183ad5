"""Shared helpers for side-by-side benchmarks: the reference peers, processes, /proc stats.

Every reference peer is installed and found here, the same way on any machine:

* ``reference_venv()``: carbon 1.1.10 + whisper 1.1.10 (daemons, and carbon's modules for
  in-process comparisons; ``reference_package_dir`` finds a package inside it);
* ``graphite_web_venv()``: graphite-web 1.1.10 on Python 3.9 (``python39``), with gunicorn;
  both interpreters are found by ``carbon.playground.reference_peer.find_python``;
* ``crelay_binary()``: carbon-c-relay, if installed (a system package; None when absent);
* ``victoria_metrics_binary()``: VictoriaMetrics single-node, built with ``go install``
  (None when Go is absent); ``start_vm``, ``vm_query``, ``vm_flush`` run and ask it.

Venvs are made on first use under ``CARBON_BENCH_CACHE`` (default ``~/.cache/carbon-bench``).
Comparisons run in A B B A order (``abba``) and keep every run's folder until the end
(``RunDirs``): ext4 makes creates slow for a while after mass deletions, which would
penalise whichever side runs second.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Sequence, TypeVar

from carbon.playground.ports import free_port  # noqa: F401 - the benches' port chooser
from carbon.playground.reference_peer import (build_venv, cache_dir, find_python,
                                               reference_venv, reference_venv_dir, venv_usable)

ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = cache_dir()
REF_VENV = reference_venv_dir()
GRAPHITE_WEB_VENV = CACHE_DIR / "ref-graphite-web-1.1.10"
# graphite-web 1.1.10 runs on Python < 3.11 with Django 2.2 and pyparsing 2 (its grammar
# uses pyparsing 2 names); msgpack is optional and left out; cairocffi needs libcairo2;
# gunicorn serves it in the render bench.
GRAPHITE_WEB_REQS = ["graphite-web==1.1.10", "Django>=2.2,<2.3", "django-tagging==0.4.3",
                     "pyparsing==2.4.7", "cairocffi", "whisper==1.1.10", "pytz", "six",
                     "urllib3<2", "setuptools<70", "gunicorn"]
GRAPHITE_WEB_PYTHONS = ((3, 9),)
T = TypeVar("T")


def reference_package_dir(package: str = "carbon", venv: Path | None = None) -> Path:
    """The folder of ``package`` as installed in a reference venv (default: carbon's)."""
    venv = venv if venv is not None else reference_venv()
    code = ("import importlib.util as u; "
            "print(list(u.find_spec(%r).submodule_search_locations)[0])" % package)
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True,
                         text=True, check=True, cwd="/")
    return Path(out.stdout.strip())


def crelay_binary() -> str | None:
    """carbon-c-relay (Debian names it ``carbon-c-relay``, its build ``relay``), or None."""
    return shutil.which("carbon-c-relay") or shutil.which("relay")


VM_VERSION = "v1.151.0"
VM_PACKAGE = "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics"
GO_DIR = CACHE_DIR / "go"


def victoria_metrics_binary() -> str | None:
    """VictoriaMetrics single-node (VM_VERSION), built on first use with ``go install``
    from the Go module proxy into ``CACHE_DIR/go`` (its GOPATH, module and build caches
    too, so a rerun reuses them); None when Go is not installed."""
    binary = GO_DIR / "bin" / "victoria-metrics"
    marker = GO_DIR / ("victoria-metrics-%s.installed" % VM_VERSION)
    if binary.exists() and marker.exists():
        return str(binary)
    go = shutil.which("go") or next((str(p) for p in [Path("/usr/local/go/bin/go")]
                                     if p.exists()), None)
    if go is None:
        return None
    env = dict(os.environ, GOBIN=str(GO_DIR / "bin"), GOPATH=str(GO_DIR / "path"),
               GOMODCACHE=str(GO_DIR / "path" / "pkg" / "mod"),
               GOCACHE=str(GO_DIR / "build"), GOFLAGS="-mod=mod")
    print("building VictoriaMetrics %s with go install (once; minutes)" % VM_VERSION,
          flush=True)
    subprocess.run([go, "install", "%s@%s" % (VM_PACKAGE, VM_VERSION)], check=True,
                   env=env, cwd="/")
    marker.write_text(VM_VERSION + "\n")
    return str(binary)


def start_vm(binary: str, base: Path, *flags: str) -> tuple[subprocess.Popen, int, int]:
    """VictoriaMetrics on loopback with its data in ``base / "data"`` and its log in
    ``base / "vm.log"``: (process, HTTP port, Graphite plaintext port), once both listen.
    ``-search.disableCache`` (a cached answer could hide points still missing) and
    ``-search.latencyOffset=0s`` (by default it hides the last 30 s); ``flags`` more."""
    http, graphite = free_port(), free_port()
    with open(base / "vm.log", "a") as log:
        proc = subprocess.Popen(
            [binary, "-httpListenAddr=127.0.0.1:%d" % http,
             "-graphiteListenAddr=127.0.0.1:%d" % graphite,
             "-storageDataPath=%s" % (base / "data"), "-search.disableCache",
             "-search.latencyOffset=0s", "-loggerLevel=WARN", *flags],
            stdout=log, stderr=subprocess.STDOUT, cwd=str(base))
    try:
        wait_port(http, proc)
        wait_port(graphite, proc)
    except RuntimeError:
        stop(proc)
        print((base / "vm.log").read_text()[-3000:])
        raise
    return proc, http, graphite


def vm_query(port: int, query: str, at: int) -> float:
    """The first value of a PromQL instant query at ``at`` (0.0 for an empty answer)."""
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode(
        {"query": query, "time": str(at)}))
    with urllib.request.urlopen(url, timeout=30) as response:
        body = json.load(response)
    result = body["data"]["result"]
    return float(result[0]["value"][1]) if result else 0.0


def vm_flush(port: int) -> None:
    """``/internal/force_flush``: VictoriaMetrics' in-memory parts written to files (then
    searchable, and kept over kill -9)."""
    with urllib.request.urlopen("http://127.0.0.1:%d/internal/force_flush" % port,
                                timeout=60) as response:
        response.read()


def loadavg(fields: int = 1) -> str:
    """The load average (/proc/loadavg: 1 minute, or the 1/5/15-minute figures joined
    by "/" for ``fields`` 3), noted beside every number."""
    with open("/proc/loadavg") as handle:
        return "/".join(handle.read().split()[:fields])


def abba(first: T, second: T, rounds: int = 2) -> list[T]:
    """``first``, ``second`` in alternating order: A B, A B B A, A B B A A B, ..."""
    order: list[T] = []
    for i in range(rounds):
        order += [first, second] if i % 2 == 0 else [second, first]
    return order


def mirrored(items: Sequence[T], rounds: int = 2) -> list[T]:
    """``items`` forwards, then backwards, ... (A B C C B A for two rounds)."""
    order: list[T] = []
    for i in range(rounds):
        order += list(items) if i % 2 == 0 else list(reversed(items))
    return order


class RunDirs:
    """Temporary run folders, all removed at the end (``with RunDirs() as dirs``)."""

    def __init__(self) -> None:
        self.paths: list[Path] = []

    def new(self, prefix: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix=prefix))
        self.paths.append(path)
        return path

    def __enter__(self) -> RunDirs:
        return self

    def __exit__(self, *exc: object) -> None:
        for path in self.paths:
            shutil.rmtree(path, ignore_errors=True)


def python39() -> str:
    """A Python 3.9 interpreter (graphite-web 1.1.10's), found as every reference peer's
    is: carbon.playground.reference_peer.find_python."""
    return find_python(GRAPHITE_WEB_PYTHONS, "graphite-web 1.1.10")


def graphite_web_venv(extra: tuple[str, ...] = ()) -> Path:
    """A Python 3.9 venv with graphite-web 1.1.10 (installed on first use, in its own
    folder beside the carbon one, built aside and renamed into place when complete;
    GRAPHITE_NO_PREFIX keeps it out of /opt/graphite). ``extra`` packages (e.g.
    gunicorn) are added when missing."""
    venv = GRAPHITE_WEB_VENV
    env = dict(os.environ, GRAPHITE_NO_PREFIX="True")

    def pip(python: Path) -> list[str]:
        return [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]

    def install(python: Path) -> None:
        subprocess.run(pip(python) + GRAPHITE_WEB_REQS, check=True, env=env)

    if not venv_usable(venv):
        build_venv(venv, python39(), install)
    wanted = [name for name in extra if not (venv / "bin" / name).exists()]
    if wanted:
        subprocess.run(pip(venv / "bin" / "python") + wanted, check=True, env=env)
    return venv


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("process exited with %s" % proc.returncode)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("port %d did not open" % port)


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its reaped children."""
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(fields[i]) for i in (11, 12)) / ticks


def rss_kb(pid: int, key: str = "VmRSS") -> int:
    with open("/proc/%d/status" % pid) as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def stop_gracefully(proc: subprocess.Popen, timeout: float = 60) -> None:
    """SIGINT (a server's clean shutdown: VictoriaMetrics writes its in-memory parts),
    then SIGKILL if it has not exited within ``timeout`` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    stop(proc)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(30)
