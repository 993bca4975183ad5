"""carbon 1.1.10 and whisper 1.1.10 in a venv of their own, installed on first use.

The playground's ``reference`` subject runs these daemons; the benchmarks and interop
tests use the same venv (bench/common.py). The folder is ``ref-carbon-1.1.10`` under
``CARBON_BENCH_CACHE`` (default ``~/.cache/carbon-bench``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def cache_dir() -> Path:
    """Where reference peers are installed (``CARBON_BENCH_CACHE``)."""
    return Path(os.environ.get("CARBON_BENCH_CACHE", Path.home() / ".cache" / "carbon-bench"))


def reference_venv_dir() -> Path:
    """The carbon 1.1.10 venv's folder (it may not exist yet)."""
    return cache_dir() / "ref-carbon-1.1.10"


def reference_venv() -> Path:
    """A venv with carbon 1.1.10 and whisper 1.1.10 (installed on first use)."""
    venv = reference_venv_dir()
    python = venv / "bin" / "python"
    if not (venv / "bin" / "carbon-cache.py").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run(pip + ["setuptools", "wheel", "twisted", "whisper==1.1.10"], check=True)
        env = dict(os.environ, GRAPHITE_NO_PREFIX="True", USE_SETUPTOOLS="1")
        subprocess.run(pip + ["--no-build-isolation", "carbon==1.1.10"], check=True, env=env)
    return venv
