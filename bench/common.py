"""Shared helpers for side-by-side benchmarks: the reference peers, processes, /proc stats.

Every reference peer is installed and found here, the same way on any machine:

* ``reference_venv()``: carbon 1.1.10 + whisper 1.1.10 (daemons, and carbon's modules for
  in-process comparisons; ``reference_package_dir`` finds a package inside it);
* ``graphite_web_venv()``: graphite-web 1.1.10 on Python 3.9 (``python39``), with gunicorn;
* ``crelay_binary()``: carbon-c-relay, if installed (a system package; None when absent).

Venvs are made on first use under ``CARBON_BENCH_CACHE`` (default ``~/.cache/carbon-bench``).
Comparisons run in A B B A order (``abba``) and keep every run's folder until the end
(``RunDirs``): ext4 makes creates slow for a while after mass deletions, which would
penalise whichever side runs second.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence, TypeVar

ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = Path(os.environ.get("CARBON_BENCH_CACHE", Path.home() / ".cache" / "carbon-bench"))
REF_VENV = CACHE_DIR / "ref-carbon-1.1.10"
GRAPHITE_VENV = CACHE_DIR / "graphite-web-1.1.10-py39"
GRAPHITE_REQS = ["graphite-web==1.1.10", "Django>=2.2,<2.3", "django-tagging==0.4.3",
                 "pyparsing==2.4.7", "cairocffi", "whisper==1.1.10", "pytz", "six",
                 "urllib3<2", "gunicorn"]
T = TypeVar("T")


def reference_venv() -> Path:
    """A venv with carbon 1.1.10 and whisper 1.1.10 (installed on first use)."""
    python = REF_VENV / "bin" / "python"
    if not (REF_VENV / "bin" / "carbon-cache.py").exists():
        subprocess.run([sys.executable, "-m", "venv", str(REF_VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run(pip + ["setuptools", "wheel", "twisted", "whisper==1.1.10"], check=True)
        env = dict(os.environ, GRAPHITE_NO_PREFIX="True", USE_SETUPTOOLS="1")
        subprocess.run(pip + ["--no-build-isolation", "carbon==1.1.10"], check=True, env=env)
    return REF_VENV


def reference_package_dir(package: str = "carbon", venv: Path | None = None) -> Path:
    """The folder of ``package`` as installed in a reference venv (default: carbon's)."""
    venv = venv if venv is not None else reference_venv()
    code = ("import importlib.util as u; "
            "print(list(u.find_spec(%r).submodule_search_locations)[0])" % package)
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True,
                         text=True, check=True, cwd="/")
    return Path(out.stdout.strip())


def python39() -> str:
    """A Python 3.9 interpreter (graphite-web 1.1.10 needs Python < 3.11): pyenv's, else
    ``python3.9`` on PATH."""
    roots = [os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv")]
    pyenv = shutil.which("pyenv")
    if pyenv:
        out = subprocess.run([pyenv, "root"], capture_output=True, text=True)
        roots.insert(0, out.stdout.strip())
    for root in filter(None, roots):
        found = sorted(Path(root).glob("versions/3.9*/bin/python"))
        if found:
            return str(found[-1])
    found_path = shutil.which("python3.9")
    if not found_path:
        raise SystemExit("Python 3.9 not found (graphite-web 1.1.10 needs Python < 3.11)")
    return found_path


def graphite_web_venv() -> Path:
    """A Python 3.9 venv with graphite-web 1.1.10 and gunicorn (installed on first use)."""
    marker = GRAPHITE_VENV / ".installed"
    if not marker.exists():
        shutil.rmtree(GRAPHITE_VENV, ignore_errors=True)
        subprocess.run([python39(), "-m", "venv", str(GRAPHITE_VENV)], check=True)
        env = dict(os.environ, GRAPHITE_NO_PREFIX="1")
        subprocess.run([str(GRAPHITE_VENV / "bin" / "pip"), "install", "-q"] + GRAPHITE_REQS,
                       check=True, env=env)
        marker.write_text("ok")
    return GRAPHITE_VENV


def crelay_binary() -> str | None:
    """carbon-c-relay (Debian names it ``carbon-c-relay``, its build ``relay``), or None."""
    return shutil.which("carbon-c-relay") or shutil.which("relay")


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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(30)
