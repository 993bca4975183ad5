"""``mode = "hup"``: one running stack per disk, each sweep point applied by SIGHUP; with
``profile = true`` (no py-spy here: cProfile) the daemon's profile is in the report;
``precreate = true`` makes the load's files before the daemons start (no warm-up)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from carbon.playground.cli import main

SCENARIO = """[scenario]
name = "hup"
mode = "hup"
settle_timeout = 15
profile = true
precreate = true

[load]
metrics = 100
rate = 300
duration = 2
step = 1

[carbon]
# writes as soon as the rate allows (not paced to one pass a second): with 100 metrics a
# 1 s pass caps the unlimited points at ~100 updates a second, too close to the 30 limit
WRITER_MIN_PASS_SECONDS = 0

[sweep]
MAX_UPDATES_PER_SECOND = ["inf", 30]
disk = ["ssd", "none"]
"""


def test_hup_sweep_steps_one_running_cache(tmp_path: Path, capsys: object,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # the profiler is cProfile only where py-spy is not on PATH (a developer's venv may
    # have it): take every folder holding one off PATH for this run
    monkeypatch.setenv("PATH", os.pathsep.join(
        folder for folder in os.environ.get("PATH", "").split(os.pathsep)
        if folder and not os.path.exists(os.path.join(folder, "py-spy"))))
    path = tmp_path / "hup.toml"
    path.write_text(SCENARIO)
    assert main([str(path), "--out", str(tmp_path / "report")]) == 0
    rows = json.loads((tmp_path / "report" / "results.json").read_text())["rows"]
    assert [(row["point"]["MAX_UPDATES_PER_SECOND"], row["disk"], row["point"].get("repeat"))
            for row in rows] == [
        ("inf", "ssd", None), ("inf", "none", None), ("30", "ssd", None), ("30", "none", None),
        ("inf", "ssd", 2), ("inf", "none", 2)]  # each disk's first point again: the noise
    for row in rows:
        assert row["points_on_disk"] + row["points_lost"] == row["sent"] > 400
        assert row["points_lost"] == 0
        assert row["warmup_seconds"] == 0  # precreated: every file existed at the start
        assert row["creates"] < 100  # the self-metrics' files; none of the 100 loaded
    # one process per disk served both of its points; its second ran at the new limit
    by_disk = {disk: [row for row in rows if row["disk"] == disk] for disk in ("ssd", "none")}
    for first, second, again in by_disk.values():
        assert first["pids"] == second["pids"] == again["pids"]
        assert again["update_ops_per_s"] > 100  # SIGHUP back to no limit
        # (30 a second plus the token bucket's burst of 30 at the start of the window)
        assert second["update_ops_per_s"] <= 50
        assert first["update_ops_per_s"] > 100
        assert second["points_per_update"] > first["points_per_update"]
    assert by_disk["ssd"][0]["pids"] != by_disk["none"][0]["pids"]
    profiles = list((tmp_path / "report" / "profiles").glob("*cache-a*"))
    assert len(profiles) == 2 and "function calls" in profiles[0].read_text()
    for profile in profiles:
        assert 'href="profiles/%s"' % profile.name in \
            (tmp_path / "report" / "index.html").read_text()
