"""The real-throttle check: cgroup v2 mounts read from mountinfo, and a plain reason
for each missing piece (root, a v2 hierarchy, its io controller, a block device)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from carbon.playground.cgroup_io import cgroup2_mounts, io_throttle_status
from carbon.playground.cli import main

V1_ONLY = "38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n"


def mountinfo(tmp_path: Path, root: Path | None) -> str:
    text = V1_ONLY
    if root is not None:
        text += "41 31 0:38 / %s rw,relatime - cgroup2 cgroup2 rw\n" % root
    path = tmp_path / "mountinfo"
    path.write_text(text)
    return str(path)


def test_each_missing_piece_is_named(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        assert io_throttle_status(tmp_path) == (False, "not root")
        return
    assert cgroup2_mounts(mountinfo(tmp_path, None)) == []
    assert io_throttle_status(tmp_path, mountinfo(tmp_path, None)) == (
        False, "no cgroup v2 hierarchy is mounted")
    unified = tmp_path / "unified"
    unified.mkdir()
    (unified / "cgroup.controllers").write_text("cpu memory pids\n")
    usable, why = io_throttle_status(tmp_path, mountinfo(tmp_path, unified))
    assert not usable and why.startswith("the cgroup v2 hierarchy at %s has no io" % unified)
    (unified / "cgroup.controllers").write_text("cpu io memory\n")
    usable, why = io_throttle_status(tmp_path, mountinfo(tmp_path, unified))
    assert usable == why.startswith("io.max under %s on block device " % unified)
    assert usable or why == "%s is not on a block device" % tmp_path


def test_check_prints_whether_a_real_throttle_is_available(capsys: pytest.CaptureFixture
                                                            ) -> None:
    scenario = Path(__file__).resolve().parents[2] / "tools" / "scenarios" / "strategies.toml"
    assert main([str(scenario), "--check"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("real disk throttle (cgroup v2 io.max): ")
    assert "usable" in line or "not available here: " in line
