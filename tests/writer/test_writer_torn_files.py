"""Files left by a create that kill -9 interrupted: the writer mends them and keeps the
points; a corrupt file that is not one keeps carbon's behaviour (counted, dropped)."""

from __future__ import annotations

import os
import time

import pytest
import whisper

from carbon.cache.store import MetricCache
from carbon.cache.strategies import StrategyConfig, make_strategy
from carbon.config.schemas import SchemaFiles
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.logs import CarbonLog
from carbon.storage.whisper_backend import WhisperDatabase
from carbon.writer.writer import Writer, WriterConfig
from tests.support import read_whisper

NOW = int(time.time()) // 60 * 60


def write_everything(tmp_path, cut) -> tuple[dict, Stats, str]:
    """Create a file, cut it with ``cut(path, size)``, then write points to it."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "storage-schemas.conf").write_text(
        "[all]\npattern = .*\nretentions = 60s:1d,300s:7d\n")
    settings = Settings(LOCAL_DATA_DIR=str(tmp_path / "whisper"),
                        MAX_UPDATES_PER_SECOND=float("inf"),
                        MAX_CREATES_PER_MINUTE=float("inf"), LOG_UPDATES=False)
    database = WhisperDatabase.from_settings(settings)
    database.create("torn.m", [(60, 1440), (300, 2016)], None, None)
    database.close()
    path = database.get_filesystem_path("torn.m")
    cut(path, os.path.getsize(path))
    cache = MetricCache()
    cache.add_batch([("torn.m", float(NOW - 60 * k), float(k)) for k in (3, 2, 1)])
    stats = Stats()
    database = WhisperDatabase.from_settings(settings)
    writer = Writer(cache, make_strategy("sorted", cache, StrategyConfig.from_settings(settings)),
                    database, SchemaFiles(str(tmp_path / "conf")),
                    WriterConfig.from_settings(settings), stats,
                    CarbonLog(logdir=str(tmp_path / "log")))
    deadline = time.monotonic() + 20
    while (cache or writer.creator.ready or writer.creator.busy) and time.monotonic() < deadline:
        writer.write_some()
    database.close()
    return read_whisper(path, NOW - 600, NOW), stats, path


@pytest.mark.parametrize("keep", [0, 10, 40, "header", "half"])
def test_an_interrupted_create_is_mended_and_nothing_lost(tmp_path, keep) -> None:
    header = 16 + 2 * 12

    def cut(path: str, size: int) -> None:
        length = {"header": header, "half": header + (size - header) // 2}.get(keep, keep)
        os.truncate(path, length)

    stored, stats, path = write_everything(tmp_path, cut)
    assert stored == {NOW - 180: 3.0, NOW - 120: 2.0, NOW - 60: 1.0}
    assert whisper.info(path)["archives"][1]["points"] == 2016
    if keep != "half":  # a write into the first half needs no mending
        assert os.path.getsize(path) == header + (1440 + 2016) * 12


def test_a_corrupt_header_is_not_taken_for_one(tmp_path) -> None:
    def corrupt(path: str, size: int) -> None:
        with open(path, "r+b") as handle:
            handle.write(b"\xff" * 16)  # an impossible header over a full-size file

    stored, stats, path = write_everything(tmp_path, corrupt)
    assert stored == {} and os.path.getsize(path) > 40000
    assert stats.snapshot_and_reset()[0]["errors"] == 1
