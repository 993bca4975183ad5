"""A recommendation only where two settings differ by more than the run-to-run noise the
sweep measured by repeating a point; with the carbon.conf lines to copy. A --quick report
says it is a smoke test and names the load that ran; reports default to an ignored folder."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from carbon.playground.cli import default_out, main
from carbon.playground.report import load_as_run, noise, recommendations, write_report
from carbon.playground.runner import point_label
from carbon.playground.scenario import ScenarioError, load_scenario

ROOT = Path(__file__).resolve().parents[2]

SCENARIO = """[scenario]
name = "noise"
description = "Two strategies at 6,000 metrics (the full form)."
{repeats}

[load]
metrics = 6000
rate = 600
duration = 300
connections = 2

[sweep]
CACHE_WRITE_STRATEGY = ["sorted", "naive"]
MAX_UPDATES_PER_SECOND = [500]

[quick]
load = {{ metrics = 300, duration = 3, connections = 1 }}
"""


def scenario(tmp_path: Path, repeats: str = "", quick: bool = True):
    path = tmp_path / "noise.toml"
    path.write_text(SCENARIO.format(repeats=repeats))
    return load_scenario(path, quick=quick)


def make_rows(runs: list[dict], committed: dict, cpu: dict) -> list[dict]:
    """Rows as the runner writes them, for the runs given, with chosen figures
    (``committed[(strategy, run)]``)."""
    rows = []
    for index, point in enumerate(runs):
        key = (point["CACHE_WRITE_STRATEGY"], point.get("repeat", 1))
        rows.append({
            "index": index, "label": point_label(point), "point": point,
            "subject": point["subject"], "disk": point["disk"], "disk_emulated": False,
            "committed_per_s": committed[key], "cpu_percent": cpu[key], "sent": 1800,
            "sent_per_s": 599.0, "load_seconds": 3.0, "active_seconds": 5.0, "metrics": 300,
            "points_per_update": 1.0, "peak_cache_size": 20.0, "final_cache_size": 0.0,
            "peak_rss_mb": 35.0, "writes_per_s": committed[key], "points_lost": 0,
            "time_to_disk": 1.0, "bytes_written": 1000, "cache_overflow": 0,
            "series": {"t0": 0.0, "load_end": 3.0, "end": 5.0, "received": [[1.0, 1.0]],
                       "committed": [[1.0, 1.0]], "cache_size": [[1.0, 1.0]],
                       "update_ops": [[1.0, 1.0]], "points_per_update": [[1.0, 1.0]],
                       "cpu": {"cache-a": [[1.0, 1.0]]}, "rss": {"cache-a": [[1.0, 1.0]]}}})
    return rows


def test_the_first_point_of_each_group_runs_again(tmp_path: Path) -> None:
    runs = scenario(tmp_path).runs()
    assert [(p["CACHE_WRITE_STRATEGY"], p.get("repeat")) for p in runs] == [
        ("sorted", None), ("naive", None), ("sorted", 2)]
    assert point_label(runs[2]) == \
        "CACHE_WRITE_STRATEGY=sorted MAX_UPDATES_PER_SECOND=500 disk=none [ours] (run 2)"
    assert len(scenario(tmp_path, "repeats = 3").runs()) == 4
    assert len(scenario(tmp_path, "repeats = 1").runs()) == 2
    with pytest.raises(ScenarioError, match=r"noise.toml, line 4, key scenario.repeats: must "
                                            r"be at least 1"):
        scenario(tmp_path, "repeats = 0")


def test_difference_within_the_noise_recommends_nothing(tmp_path: Path) -> None:
    s = scenario(tmp_path)
    # naive is 10 points/s ahead, but sorted's two runs differ by 30: noise
    rows = make_rows(s.runs(), {("sorted", 1): 450.0, ("naive", 1): 470.0,
                                ("sorted", 2): 480.0}, {("sorted", 1): 3.0, ("naive", 1): 3.1,
                                                        ("sorted", 2): 3.2})
    found = noise(rows)
    assert found["committed_spread"] == 30.0 and found["runs"] == 2
    [item] = recommendations(rows, s)
    assert item["point"] is None and item["conf"] == ""
    assert item["text"].startswith("No recommendation: no setting beats every other by more "
                                   "than the run-to-run noise, measured by running "
                                   "CACHE_WRITE_STRATEGY=sorted MAX_UPDATES_PER_SECOND=500 "
                                   "disk=none [ours] 2 times: 30.0 points/s committed "
                                   "(450.0, 480.0)")


def test_difference_beyond_the_noise_recommends_with_conf_lines(tmp_path: Path) -> None:
    s = scenario(tmp_path)
    rows = make_rows(s.runs(), {("sorted", 1): 450.0, ("naive", 1): 520.0,
                                ("sorted", 2): 455.0}, {("sorted", 1): 3.0, ("naive", 1): 3.1,
                                                        ("sorted", 2): 3.2})
    [item] = recommendations(rows, s)
    assert item["point"] == {"CACHE_WRITE_STRATEGY": "naive", "MAX_UPDATES_PER_SECOND": "500",
                             "disk": "none", "subject": "ours"}
    assert item["conf"] == "[cache]\nCACHE_WRITE_STRATEGY = naive\nMAX_UPDATES_PER_SECOND = 500"
    assert item["text"].startswith("Recommended: CACHE_WRITE_STRATEGY=naive")
    assert "5.0 points/s committed (450.0, 455.0)" in item["text"]
    # the report carries the lines to copy
    write_report(tmp_path / "report", s, rows, {"points_planned": 3})
    markdown = (tmp_path / "report" / "results.md").read_text()
    assert "```ini\n[cache]\nCACHE_WRITE_STRATEGY = naive\nMAX_UPDATES_PER_SECOND = 500\n```" \
        in markdown
    assert "<pre>[cache]\nCACHE_WRITE_STRATEGY = naive" in \
        (tmp_path / "report" / "index.html").read_text()


def test_same_rate_cheaper_cpu_beyond_its_noise_wins(tmp_path: Path) -> None:
    s = scenario(tmp_path)
    rates = {("sorted", 1): 500.0, ("naive", 1): 501.0, ("sorted", 2): 496.0}  # noise 4
    rows = make_rows(s.runs(), rates, {("sorted", 1): 9.0, ("naive", 1): 4.0,
                                       ("sorted", 2): 9.5})
    [item] = recommendations(rows, s)
    assert item["point"]["CACHE_WRITE_STRATEGY"] == "naive"
    rows = make_rows(s.runs(), rates, {("sorted", 1): 9.0, ("naive", 1): 8.0,
                                       ("sorted", 2): 6.0})   # CPU noise 3 > the 1 saved
    assert recommendations(rows, s)[0]["point"] is None


def test_noise_not_measured_recommends_nothing(tmp_path: Path) -> None:
    s = scenario(tmp_path, "repeats = 1")
    rows = make_rows(s.runs(), {("sorted", 1): 100.0, ("naive", 1): 500.0},
                     {("sorted", 1): 3.0, ("naive", 1): 3.0})
    [item] = recommendations(rows, s)
    assert item["point"] is None
    assert item["text"].startswith("No recommendation: the run-to-run noise was not measured")


def test_quick_report_says_smoke_test_and_names_the_load_that_ran(tmp_path: Path) -> None:
    s = scenario(tmp_path)
    rows = make_rows(s.runs(), {("sorted", 1): 450.0, ("naive", 1): 470.0,
                                ("sorted", 2): 480.0}, {("sorted", 1): 3.0, ("naive", 1): 3.1,
                                                        ("sorted", 2): 3.2})
    header = load_as_run(s, rows, 3)
    assert header == (
        "Load as run: 3 run(s) (2 sweep point(s) + 1 repeat(s) of a point to measure the "
        "noise) of 3 s of load each (measured 3.0 to 3.0 s), 300 metric(s) (300 configured), "
        "1 connection(s), plaintext, 600 points/s asked; measured 599 to 599 points/s sent, "
        "1800 points a run on average, a point per metric every 10 s.")
    write_report(tmp_path / "report", s, rows, {"points_planned": 3})
    markdown = (tmp_path / "report" / "results.md").read_text()
    assert markdown.startswith("# Playground report: noise (--quick: smoke test)\n\n"
                               "**SMOKE TEST (--quick): a few seconds of load a point (3 s) "
                               "on 300 metric(s)")
    assert header in markdown
    full = scenario(tmp_path, quick=False)
    write_report(tmp_path / "full", full, rows, {"points_planned": 3})
    text = (tmp_path / "full" / "results.md").read_text()
    assert "SMOKE TEST" not in text and "smoke test" not in text
    assert json.loads((tmp_path / "full" / "results.json").read_text())["smoke_test"] is False


def test_reports_default_to_an_ignored_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture) -> None:
    monkeypatch.delenv("CARBON_PLAYGROUND_REPORTS", raising=False)
    relative = default_out("strategies")
    assert relative.parent == Path("playground-reports")
    if (ROOT / ".git").exists():
        for where in (relative, Path("tools") / relative):
            probe = subprocess.run(["git", "check-ignore", "-q", str(where / "index.html")],
                                   cwd=ROOT)
            assert probe.returncode == 0, "%s is not ignored by .gitignore" % where
    else:
        assert "playground-reports/" in (ROOT / ".gitignore").read_text().splitlines()
    monkeypatch.setenv("CARBON_PLAYGROUND_REPORTS", str(tmp_path / "elsewhere"))
    assert default_out("x").parent == tmp_path / "elsewhere"
    # --check lists the runs, the repeat included
    path = tmp_path / "noise.toml"
    path.write_text(SCENARIO.format(repeats=""))
    assert main([str(path), "--check"]) == 0
    assert "2 sweep points, 3 runs" in capsys.readouterr().out
    assert os.environ["CARBON_PLAYGROUND_REPORTS"] == str(tmp_path / "elsewhere")


def test_the_only_setting_within_the_bounds_needs_no_noise(tmp_path: Path) -> None:
    s = scenario(tmp_path, "repeats = 1")
    rows = make_rows(s.runs(), {("sorted", 1): 100.0, ("naive", 1): 500.0},
                     {("sorted", 1): 3.0, ("naive", 1): 3.0})
    rows[1]["points_lost"] = 7   # naive lost points: outside the bounds
    [item] = recommendations(rows, s)
    assert item["point"]["CACHE_WRITE_STRATEGY"] == "sorted"
    assert item["text"].startswith("Recommended: CACHE_WRITE_STRATEGY=sorted "
                                   "MAX_UPDATES_PER_SECOND=500 disk=none [ours], the only "
                                   "setting within the scenario's bounds.")
    assert item["text"].endswith("Outside the bounds: CACHE_WRITE_STRATEGY=naive "
                                 "MAX_UPDATES_PER_SECOND=500 disk=none [ours] (7 points lost).")
