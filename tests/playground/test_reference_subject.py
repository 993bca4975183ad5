"""``subjects = ["ours", "reference"]``: the same load and emulated disk against carbon
1.1.10 (its own venv, the emulated-disk plugin added to its registry by refshim)."""

from __future__ import annotations

import json
from pathlib import Path

from carbon.playground.cli import main
from carbon.playground.reference_peer import reference_venv

SCENARIO = """[scenario]
name = "versus"
settle_timeout = 4
warmup = false
subjects = ["ours", "reference"]
allow_drops = true

[load]
metrics = 300
rate = 600
duration = 1
step = 10

[carbon]
MAX_UPDATES_PER_SECOND = "inf"

[sweep]
MAX_CREATES_PER_MINUTE = [60]
disk = ["hdd"]
"""


def test_reference_runs_the_same_sweep_and_drops_throttled_creates(tmp_path: Path) -> None:
    reference_venv()  # installed on first use, as for the benchmarks
    path = tmp_path / "versus.toml"
    path.write_text(SCENARIO)
    assert main([str(path), "--out", str(tmp_path / "report")]) == 0
    document = json.loads((tmp_path / "report" / "results.json").read_text())
    ours, reference = document["rows"]
    assert (ours["subject"], reference["subject"]) == ("ours", "reference")
    for row in (ours, reference):
        assert row["disk_emulated"] and row["sent"] > 400
        assert row["points_on_disk"] + row["points_lost"] == row["sent"]
    # a create waiting for its token keeps its points here; carbon 1.1.10 drops them
    assert ours["points_lost"] == 0
    assert reference["points_lost"] > 0
    assert "carbon 1.1.10 through the same model" in document["disk_note"]
    # 60 creates a minute cannot make 300 files in the run: the time until every file
    # exists is projected from the measured pace, and the report says so
    assert ours["files_before_stop"] < 300 and ours["all_files_after_s"] is None
    assert ours["all_files_projected_s"] > ours["active_seconds"]
    assert "files before the stop" in document["files_note"] and "(projected)" in \
        document["files_note"]
