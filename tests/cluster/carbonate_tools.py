"""carbonate 1.1.10, installed on first use next to (not into) the test venv, run over
our ``carbon`` package the way its console scripts run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
CARBONATE = Path.home() / ".cache" / "carbon-fast" / "carbonate-1.1.10"


def carbonate_path() -> Path:
    """The folder holding the ``carbonate`` package (pip --no-deps --target, cached)."""
    if not (CARBONATE / "carbonate" / "cli.py").exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                        str(CARBONATE), "carbonate==1.1.10"], check=True)
    return CARBONATE


def run_carbonate(tool: str, args: list[str], stdin: str = "", cwd: Path | None = None,
                  timeout: float = 120) -> subprocess.CompletedProcess:
    """Run carbonate's ``tool`` (carbon-lookup -> carbonate.cli:carbon_lookup)."""
    entry = tool.replace("-", "_")
    code = ("import sys; from carbonate.cli import %s as main; sys.argv = [%r] + sys.argv[1:];"
            " main()" % (entry, tool))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(carbonate_path()), str(ROOT)]))
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run([sys.executable, "-c", code, *args], input=stdin, env=env,
                          capture_output=True, text=True, timeout=timeout,
                          cwd=str(cwd) if cwd else None)
