"""Scenario files: shipped ones load, bad ones stop naming file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from carbon.playground.scenario import ScenarioError, load_scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "tools" / "scenarios").glob("*.toml"))

GOOD = """[scenario]
name = "t"

[load]
metrics = 10
rate = 100
duration = 1

[carbon]
MAX_CACHE_SIZE = "inf"

[sweep]
CACHE_WRITE_STRATEGY = ["sorted", "max"]
disk = ["none", "hdd"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


def test_shipped_scenarios_load_in_both_forms() -> None:
    assert {path.name for path in SCENARIOS} >= {
        "strategies.toml", "relay-three-caches.toml", "new-metrics.toml", "cache-limit.toml"}
    for path in SCENARIOS:
        full, quick = load_scenario(path), load_scenario(path, quick=True)
        assert full.points() and quick.points()
        assert quick.load.duration * len(quick.runs()) < 40, path.name
        # the full form's load alone fits its 15 minutes (startup and settling come on top)
        assert full.load.duration * len(full.runs()) < 900, path.name
    long = load_scenario(ROOT / "tools" / "scenarios" / "strategies.toml", long=True)
    assert long.settings.mode == "restart" and long.load.duration == 300
    assert len([p for p in long.points() if p["subject"] == "ours"]) == 30


def test_sweep_is_crossed_and_quick_merges(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, GOOD + '[quick]\nload = { rate = 5 }\n'),
                             quick=True)
    assert len(scenario.points()) == 4
    assert scenario.load.rate == 5 and scenario.load.metrics == 10
    assert {"CACHE_WRITE_STRATEGY": "max", "disk": "hdd", "subject": "ours"} \
        in scenario.points()


@pytest.mark.parametrize("edit, line, key, reason", [
    (("[load]\n", "[load]\ncolour = 1\n"), 5, "load.colour", "unknown load setting"),
    (('"sorted", "max"', '"sorted", "fastest"'), 13, "sweep.CACHE_WRITE_STRATEGY",
     "unknown strategy 'fastest'"),
    (('MAX_CACHE_SIZE = "inf"', 'MAX_CACHE_SIZE = "lots"'), 10, "carbon.MAX_CACHE_SIZE",
     "invalid number 'lots'"),
    (('MAX_CACHE_SIZE = "inf"', 'MAX_CACHE_SIZ = 5'), 10, "carbon.MAX_CACHE_SIZ",
     "not a carbon.conf key"),
    (('"none", "hdd"', '"none", "floppy"'), 14, "sweep.disk", "'floppy' is not one of"),
    (("rate = 100", 'rate = "fast"'), 6, "load.rate", "is not a float"),
    (('name = "t"', 'name = "t"\nsubjects = ["ours", "reference"]\n'
                    'reference_points = { disk = ["ssd"] }'), 4,
     "scenario.reference_points.disk", "'ssd' is not swept"),
    (('name = "t"', 'name = "t"\nsubjects = ["ours", "reference"]\n'
                    'reference_points = { MAX_QUEUE_SIZE = [1] }'), 4,
     "scenario.reference_points.MAX_QUEUE_SIZE", "not a swept key"),
    (("[sweep]", "[sweeps]"), 12, "sweeps", "unknown table"),
])
def test_bad_scenario_names_file_line_and_key(tmp_path: Path, edit: tuple, line: int,
                                              key: str, reason: str) -> None:
    path = write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert message.startswith("%s, line %d, key %s: " % (path, line, key)), message
    assert reason in message


def test_toml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("rate = 100", "rate = = 100"))
    with pytest.raises(ScenarioError, match=r"s.toml: .*line 6"):
        load_scenario(path)


def test_hup_mode_only_steps_reloadable_keys(tmp_path: Path) -> None:
    text = GOOD.replace('name = "t"', 'name = "t"\nmode = "hup"').replace(
        'disk = ["none", "hdd"]', 'disk = ["hdd"]\nMAX_QUEUE_SIZE = [1, 2]')
    with pytest.raises(ScenarioError, match=r"line 16, key sweep.MAX_QUEUE_SIZE: mode"):
        load_scenario(write(tmp_path, text))


def test_hup_mode_steps_one_stack_per_disk_and_reference_points_filter(
        tmp_path: Path) -> None:
    text = GOOD.replace('name = "t"', 'name = "t"\nmode = "hup"\nsubjects = ["ours", '
                        '"reference"]\nreference_points = { CACHE_WRITE_STRATEGY = ["max"] }')
    points = load_scenario(write(tmp_path, text)).points()
    assert len(points) == 6  # 4 ours, carbon 1.1.10 only at max (on both disks)
    assert [p["disk"] for p in points if p["subject"] == "reference"] == ["none", "hdd"]
    assert {p["CACHE_WRITE_STRATEGY"] for p in points if p["subject"] == "reference"} == \
        {"max"}
    # a strategy carbon 1.1.10 lacks may be swept when the reference does not run it
    bucket = text.replace('["sorted", "max"]', '["max", "bucketmax"]')
    assert len(load_scenario(write(tmp_path, bucket)).points()) == 6
    with pytest.raises(ScenarioError, match=r"line 5, key scenario.reference_points."
                       r"CACHE_WRITE_STRATEGY: carbon 1.1.10 \(subject reference\) does not "
                       r"know 'bucketmax'"):
        load_scenario(write(tmp_path, bucket.replace('= ["max"] }', '= ["bucketmax"] }')))


def test_quick_and_long_exclude_each_other(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="exclude each other"):
        load_scenario(write(tmp_path, GOOD), quick=True, long=True)


def test_reference_subject_rejects_strategies_carbon_1_1_10_lacks(tmp_path: Path) -> None:
    text = GOOD.replace('name = "t"', 'name = "t"\nsubjects = ["ours", "reference"]')
    assert len(load_scenario(write(tmp_path, text)).points()) == 8
    with pytest.raises(ScenarioError, match=r"line 14, key sweep.CACHE_WRITE_STRATEGY: "
                       r"carbon 1.1.10 \(subject reference\) does not know 'bucketmax'"):
        load_scenario(write(tmp_path, text.replace('"max"]', '"bucketmax"]')))
