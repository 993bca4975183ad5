"""Shared helpers for side-by-side benchmarks: reference venv, processes, /proc stats."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = Path(os.environ.get("CARBON_BENCH_CACHE", Path.home() / ".cache" / "carbon-bench"))
REF_VENV = CACHE_DIR / "ref-carbon-1.1.10"
GRAPHITE_WEB_VENV = CACHE_DIR / "ref-graphite-web-1.1.10"
# graphite-web 1.1.10 runs on Python < 3.11 with Django 2.2 and pyparsing 2 (its grammar
# uses pyparsing 2 names); msgpack is optional and left out; cairocffi needs libcairo2.
GRAPHITE_WEB_REQS = ["graphite-web==1.1.10", "Django>=2.2,<2.3", "django-tagging==0.4.3",
                     "pyparsing==2.4.7", "cairocffi", "whisper==1.1.10", "pytz", "six",
                     "urllib3<2", "setuptools<70"]


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


def python39() -> str:
    """A Python 3.9 interpreter: ``python3.9`` on PATH, else pyenv's 3.9."""
    found = shutil.which("python3.9")
    if found and subprocess.run([found, "-c", "pass"], capture_output=True).returncode == 0:
        return found
    if shutil.which("pyenv"):
        done = subprocess.run(["pyenv", "prefix", "3.9"], capture_output=True, text=True)
        candidate = Path(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "")
        if done.returncode == 0 and (candidate / "bin" / "python3.9").exists():
            return str(candidate / "bin" / "python3.9")
    raise RuntimeError("Python 3.9 not found (graphite-web 1.1.10 needs Python < 3.11)")


def graphite_web_venv(extra: tuple[str, ...] = ()) -> Path:
    """A Python 3.9 venv with graphite-web 1.1.10 (installed on first use, in its own
    folder beside the carbon one; GRAPHITE_NO_PREFIX keeps it out of /opt/graphite).
    ``extra`` packages (e.g. gunicorn) are added when missing."""
    venv = GRAPHITE_WEB_VENV
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    env = dict(os.environ, GRAPHITE_NO_PREFIX="True")
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if not marker.exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([python39(), "-m", "venv", str(venv)], check=True)
        subprocess.run(pip + GRAPHITE_WEB_REQS, check=True, env=env)
        marker.write_text("\n".join(GRAPHITE_WEB_REQS) + "\n")
    wanted = [name for name in extra if not (venv / "bin" / name).exists()]
    if wanted:
        subprocess.run(pip + wanted, check=True, env=env)
    return venv


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
