"""Ctrl-C during a sweep: every daemon started is stopped and the partial report kept."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support import wait_for

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = """[scenario]
name = "interrupted"
settle_timeout = 10
warmup = false

[load]
metrics = 50
rate = 100
duration = 1
step = 1

[sweep]
CACHE_WRITE_STRATEGY = ["sorted", "naive"]
MAX_UPDATES_PER_SECOND = ["inf", 5]
"""


def rows(path: Path) -> list:
    try:
        return json.loads(path.read_text())["rows"]
    except (OSError, ValueError):
        return []


def test_ctrl_c_keeps_the_partial_report_and_stops_the_daemons(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "report"
    proc = subprocess.Popen([sys.executable, str(ROOT / "tools" / "playground"), str(scenario),
                             "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        wait_for(lambda: rows(out / "results.json"), timeout=60, what="the first row")
        time.sleep(0.5)  # into the second point
        proc.send_signal(signal.SIGINT)
        _stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 130, stderr[-2000:]
    document = json.loads((out / "results.json").read_text())
    assert document["meta"]["status"].startswith("interrupted by Ctrl-C after")
    assert 1 <= len(document["rows"]) < 4
    assert "interrupted by Ctrl-C" in (out / "index.html").read_text()
    for row in document["rows"]:
        assert row["points_on_disk"] + row["points_lost"] == row["sent"]
        for pid in row["pids"].values():
            assert not Path("/proc/%d" % pid).exists() or \
                Path("/proc/%d/stat" % pid).read_text().split()[2] == "Z"
