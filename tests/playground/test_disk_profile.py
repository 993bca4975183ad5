"""The emulated-disk storage backend: real whisper files, time blocked like a slow disk."""

from __future__ import annotations

import time
from array import array
from pathlib import Path

import pytest
import whisper

from carbon.config.errors import ConfigError
from carbon.config.settings import Settings
from carbon.storage.backend import open_database
from carbon.storage.disk_model import Device, DiskProfile
from carbon.storage.emulated_disk import load_profile


def make_db(tmp_path: Path, profile: str) -> object:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "disk-profile.conf").write_text(profile)
    settings = Settings()
    settings.update(LOCAL_DATA_DIR=str(tmp_path / "data"), CONF_DIR=str(conf),
                    DATABASE="emulated-disk")
    return open_database(settings)  # as the daemon makes it


def test_device_blocks_for_queue_time_without_using_cpu() -> None:
    device = Device(DiskProfile("hdd", iops=500, latency_ms=2.0))
    wall, cpu = time.monotonic(), time.thread_time()
    device.wait(100)  # 100 I/Os at 500/s: 0.2 s + 2 ms
    wall, cpu = time.monotonic() - wall, time.thread_time() - cpu
    assert 0.2 <= wall < 0.6
    assert cpu < 0.05
    assert Device(DiskProfile("none", 0, 0.0)).wait(1000) == 0.0


def test_hdd_profile_slows_real_whisper_updates(tmp_path: Path) -> None:
    db = make_db(tmp_path, "[disk]\nprofile = hdd\niops = 1000  # faster than the default\n")
    assert db.profile.iops == 1000 and db.profile.latency_ms == 2.0
    now = int(time.time())
    metrics = ["a.m%d" % index for index in range(40)]
    started = time.monotonic()
    errors = db.create_many([(metric, [(1, 600)], 0.5, "average") for metric in metrics])
    assert errors == [None] * 40  # 160 I/Os: >= 0.16 s
    items = [(metric, array("d", [now - 5, 1.0, now - 4, 2.0])) for metric in metrics]
    taken = db.write_batch(items, now)  # 80 I/Os: >= 0.08 s
    for index, metric in enumerate(metrics):
        if taken[index] is None:
            db.write(metric, [(now - 5, 1.0), (now - 4, 2.0)], now)
    assert time.monotonic() - started >= 0.24
    assert all(seconds is None or seconds >= 0.001 for seconds in taken)
    values = whisper.fetch(db.get_filesystem_path("a.m7"), now - 10, now)[1]
    assert [v for v in values if v is not None] == [1.0, 2.0]
    db.close()


def test_creates_with_points_pay_their_updates_too(tmp_path: Path) -> None:
    """``create_many`` with points (the backend declares ``writes_on_create``): each file
    made with its points reports its seconds, its share of the device's wait added."""
    db = make_db(tmp_path, "[disk]\nprofile = hdd\niops = 1000\n")
    assert db.capabilities.writes_on_create and not db.capabilities.overlaps_creates
    now = int(time.time())
    metrics = ["p.m%d" % index for index in range(10)]
    started = time.monotonic()
    results = db.create_many([(metric, [(1, 600)], 0.5, "average") for metric in metrics],
                             [array("d", [now - 5, 1.0, now - 4, 2.0])] * 10, now)
    waited = time.monotonic() - started  # 10 creates (40 I/Os) + 10 updates (20): 0.06 s
    assert waited >= 0.06
    assert all(isinstance(seconds, float) and seconds >= 0.006 for seconds in results)
    values = whisper.fetch(db.get_filesystem_path("p.m3"), now - 10, now)[1]
    assert [v for v in values if v is not None] == [1.0, 2.0]
    db.close()


def test_bad_profile_names_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "disk-profile.conf"
    path.write_text("[disk]\nprofile = floppy\n")
    with pytest.raises(ConfigError, match=r"disk-profile.conf, line 2, key profile: 'floppy'"):
        load_profile(str(path))
    path.write_text("[disk]\nprofile = ssd\n\niops = lots\n")
    with pytest.raises(ConfigError, match=r"line 4, key iops: 'lots' is not a number"):
        load_profile(str(path))
    assert load_profile(str(tmp_path / "missing.conf")).name == "none"
