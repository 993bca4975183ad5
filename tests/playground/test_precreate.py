"""``precreate = true``: every load metric's whisper file made before the daemons start,
in batches (more files than descriptors a process may hold), as the cache would."""

from __future__ import annotations

import resource
from pathlib import Path

import whisper

from carbon.playground.scenario import load_scenario
from carbon.playground.stack import build, precreate

SCENARIO = """[scenario]
name = "pre"
precreate = true

[load]
metrics = 3000
pattern = "pre.g{g}.m{i}"
rate = 100
duration = 1
step = 10
"""


def test_precreate_makes_every_file_in_batches(tmp_path: Path) -> None:
    path = tmp_path / "pre.toml"
    path.write_text(SCENARIO)
    scenario = load_scenario(path)
    stack = build(scenario, scenario.points()[0], tmp_path / "stack", 5)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    try:
        assert precreate(scenario, stack) == 3000
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    files = list(stack.caches[0].data_dir.rglob("*.wsp"))
    assert len(files) == 3000
    info = whisper.info(str(stack.caches[0].data_dir / "pre" / "g7" / "m7.wsp"))
    assert [(a["secondsPerPoint"], a["points"]) for a in info["archives"]] == \
        [stack.load_retention]
    assert info["xFilesFactor"] == 0 and info["aggregationMethod"] == "average"
