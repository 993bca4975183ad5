"""Shared helpers for side-by-side benchmarks: reference venv, processes, /proc stats."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = Path(os.environ.get("CARBON_BENCH_CACHE", Path.home() / ".cache" / "carbon-bench"))
REF_VENV = CACHE_DIR / "ref-carbon-1.1.10"


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
