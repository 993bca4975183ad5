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
        assert quick.load.duration * len(quick.points()) < 40, path.name


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
    (('name = "t"', 'name = "t"\nmode = "hup"'), 15, "sweep.disk", "one disk"),
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


def test_reference_subject_rejects_strategies_carbon_1_1_10_lacks(tmp_path: Path) -> None:
    text = GOOD.replace('name = "t"', 'name = "t"\nsubjects = ["ours", "reference"]')
    assert len(load_scenario(write(tmp_path, text)).points()) == 8
    with pytest.raises(ScenarioError, match=r"line 14, key sweep.CACHE_WRITE_STRATEGY: "
                       r"carbon 1.1.10 \(subject reference\) does not know 'bucketmax'"):
        load_scenario(write(tmp_path, text.replace('"max"]', '"bucketmax"]')))
