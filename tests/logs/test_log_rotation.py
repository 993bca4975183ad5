"""Daily log rotation keeps LOG_ROTATION_COUNT rotated files per log (carbon 1.1.10
keeps every one)."""

from __future__ import annotations

import os

from carbon.config.settings import Settings
from carbon.logs import CarbonLog, log_for, rotated_files


def rotate_days(log: CarbonLog, days: list[tuple[int, int, int]]) -> None:
    """Write a line dated each of ``days`` in turn, as if the daemon ran through them."""
    log.msg("first")
    handle = log._file("console")
    for day in days:
        handle.lastDate = day     # the file was last written on ``day``: rotate now
        log.msg("after %s" % (day,))


def test_rotation_keeps_the_newest_count(tmp_path):
    log = CarbonLog(str(tmp_path), keep=2)
    rotate_days(log, [(2026, 11, 20), (2026, 11, 9), (2026, 10, 30), (2026, 11, 21)])
    log.close()
    assert rotated_files(str(tmp_path), "console.log") == [
        "console.log.2026_11_20", "console.log.2026_11_21"]
    assert os.path.exists(tmp_path / "console.log")


def test_count_zero_keeps_every_rotated_file(tmp_path):
    log = CarbonLog(str(tmp_path), keep=0)
    rotate_days(log, [(2026, 11, 20), (2026, 11, 9), (2026, 10, 30)])
    log.close()
    assert rotated_files(str(tmp_path), "console.log") == [
        "console.log.2026_10_30", "console.log.2026_11_9", "console.log.2026_11_20"]


def test_other_files_in_the_folder_are_left_alone(tmp_path):
    for name in ("console.log.old", "creates.log.2026_1_1", "console.log.2026_1_1.gz"):
        (tmp_path / name).write_text("x")
    log = log_for(Settings(LOG_DIR=str(tmp_path), LOG_ROTATION_COUNT=1), to_files=True)
    rotate_days(log, [(2026, 11, 20), (2026, 11, 21)])
    log.close()
    assert sorted(os.listdir(tmp_path)) == [
        "console.log", "console.log.2026_11_21", "console.log.2026_1_1.gz",
        "console.log.old", "creates.log.2026_1_1"]
