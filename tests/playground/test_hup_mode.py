"""``mode = "hup"``: one running stack, each sweep point applied by SIGHUP; with
``profile = true`` (no py-spy here: cProfile) the daemon's profile is in the report."""

from __future__ import annotations

import json
from pathlib import Path

from carbon.playground.cli import main

SCENARIO = """[scenario]
name = "hup"
mode = "hup"
settle_timeout = 15
profile = true

[load]
metrics = 100
rate = 300
duration = 2
step = 1

[sweep]
MAX_UPDATES_PER_SECOND = ["inf", 30]
disk = ["ssd"]
"""


def test_hup_sweep_steps_one_running_cache(tmp_path: Path, capsys: object) -> None:
    path = tmp_path / "hup.toml"
    path.write_text(SCENARIO)
    assert main([str(path), "--out", str(tmp_path / "report")]) == 0
    rows = json.loads((tmp_path / "report" / "results.json").read_text())["rows"]
    assert [row["point"]["MAX_UPDATES_PER_SECOND"] for row in rows] == ["inf", "30"]
    for row in rows:
        assert row["points_on_disk"] + row["points_lost"] == row["sent"] > 400
        assert row["points_lost"] == 0
    # the same process served both points: its second point ran at the new limit
    assert rows[0]["pids"] == rows[1]["pids"]
    # (30 a second plus the token bucket's burst of 30 at the start of the window)
    assert rows[1]["update_ops_per_s"] <= 50
    assert rows[0]["update_ops_per_s"] > 100
    assert rows[1]["points_per_update"] > rows[0]["points_per_update"]
    profiles = list((tmp_path / "report" / "profiles").glob("*cache-a*"))
    assert len(profiles) == 1 and "function calls" in profiles[0].read_text()
    assert 'href="profiles/%s"' % profiles[0].name in \
        (tmp_path / "report" / "index.html").read_text()
