"""The shutdown drain runs at MAX_UPDATES_PER_SECOND_ON_SHUTDOWN, new files included.

It used to run at about a third of it: every create that had to wait for a token, and
every pick that only handed metrics to the creator, spent an update token.
"""

from __future__ import annotations

import time

from carbon.cache.store import MetricCache
from carbon.cache.strategies import StrategyConfig, make_strategy
from carbon.config.schemas import SchemaFiles
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.logs import CarbonLog
from carbon.storage.whisper_backend import WhisperDatabase
from carbon.writer.writer import Writer, WriterConfig
from tests.support import read_whisper

RATE = 100
METRICS = 300


def test_drain_runs_at_the_shutdown_rate(tmp_path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "storage-schemas.conf").write_text(
        "[all]\npattern = .*\nretentions = 60s:1d\n")
    settings = Settings(LOCAL_DATA_DIR=str(tmp_path / "whisper"), MAX_UPDATES_PER_SECOND=50,
                        MAX_UPDATES_PER_SECOND_ON_SHUTDOWN=RATE, MAX_CREATES_PER_MINUTE=3000,
                        LOG_UPDATES=False, LOG_CREATES=False)
    cache = MetricCache()
    now = int(time.time()) // 60 * 60
    names = ["drain.m%03d" % i for i in range(METRICS)]
    cache.add_batch([(name, float(now - 60 * k), float(k)) for k in (3, 2, 1) for name in names])
    database = WhisperDatabase.from_settings(settings)
    writer = Writer(cache, make_strategy("sorted", cache, StrategyConfig.from_settings(settings)),
                    database, SchemaFiles(str(tmp_path / "conf")),
                    WriterConfig.from_settings(settings), Stats(),
                    CarbonLog(logdir=str(tmp_path / "log")))
    started = time.monotonic()
    assert writer.drain(timeout=60)
    took = time.monotonic() - started
    database.close()
    assert all(len(read_whisper(database.get_filesystem_path(name), now - 600, now)) == 3
               for name in names)
    # The bucket starts with RATE tokens (one second's worth): the rest takes the time.
    rate = (METRICS - RATE) / took
    assert 0.7 * RATE <= rate <= 1.3 * RATE, "drained at %.1f metrics/s, setting %d" % (
        rate, RATE)
