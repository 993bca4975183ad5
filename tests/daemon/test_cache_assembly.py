"""carbon-cache and carbon-aggregator-cache assembled in-process (nothing started): each
part holds the typed config built once from the daemon's settings, the schema check
follows the backend's declared ``whisper_files``, and a SIGHUP's new rates reach the
writer's config (the shutdown drain's rate)."""

from __future__ import annotations

from pathlib import Path

import pytest
from twisted.internet.task import Clock

from carbon.cache.journal import JournalConfig
from carbon.cache.sink import CacheSinkConfig
from carbon.cache.strategies import StrategyConfig
from carbon.carbonlink.server import CarbonLinkConfig
from carbon.config.loader import load_settings
from carbon.daemon.aggregator import AggregatorCacheDaemon
from carbon.daemon.cache import CacheDaemon
from carbon.instrumentation.reporter import ReporterConfig
from carbon.logs import CarbonLog
from carbon.plugins import STORAGE_BACKENDS
from carbon.storage.backend import Capabilities, PluginBackend
from carbon.storage.whisper_backend import WhisperConfig, WhisperDatabase
from carbon.writer.tagfeed import TagFeedConfig
from carbon.writer.writer import WriterConfig
from tests.support import CarbonInstance, MemoryBackend


def assemble(root: Path, daemon: type[CacheDaemon] = CacheDaemon, program: str = "carbon-cache",
             section: str = "cache", **conf: object) -> tuple[CacheDaemon, CarbonInstance]:
    instance = CarbonInstance(root, program=program, section=section, **conf)
    settings = load_settings(program, "a", str(instance.conf / "carbon.conf"), str(root))
    return daemon(settings, CarbonLog(logdir=str(root / "log")), Clock()), instance


@pytest.mark.parametrize("daemon,program,section", [
    (CacheDaemon, "carbon-cache", "cache"),
    (AggregatorCacheDaemon, "carbon-aggregator-cache", "aggregator-cache")])
def test_every_part_holds_its_config_from_the_settings(tmp_path, daemon, program, section):
    cache, _instance = assemble(tmp_path, daemon, program, section, MAX_UPDATES_PER_SECOND=300,
                                WRITER_KNOWN_FILES=77, CREATE_THREADS=3,
                                WHISPER_FD_CACHE_IDLE=42, MAX_CACHE_SIZE=5000,
                                MIN_TIMESTAMP_LAG=9, TAG_BATCH_SIZE=12,
                                CACHE_JOURNAL_SEGMENT_BYTES=1 << 20,
                                CARBON_METRIC_PREFIX="house")
    settings = cache.settings
    try:
        writer = cache.writer
        assert writer.config == cache.writer_config == WriterConfig.from_settings(settings)
        assert (writer.config.max_updates_per_second, writer.config.known_files) == (300.0, 77)
        assert writer.creator.config == writer.config.creator
        assert writer.creator.create_threads == 3
        assert isinstance(cache.database, WhisperDatabase)
        assert cache.database.config == WhisperConfig.from_settings(settings)
        assert cache.database.config.fd_cache_idle == 42.0
        assert cache.strategy.config == StrategyConfig.from_settings(settings)
        assert cache.strategy.config.min_timestamp_lag == 9.0
        assert cache.cache_sink.config == CacheSinkConfig.from_settings(settings)
        assert cache.cache_sink.config.max_size == 5000.0
        assert cache.carbonlink_config == CarbonLinkConfig.from_settings(settings)
        assert cache.tag_feed_config == TagFeedConfig.from_settings(settings)
        assert cache.tag_feed_config.batch_size == 12
        journal = JournalConfig.from_settings(settings)
        assert cache.journal is not None and cache.journal.directory == journal.directory
        assert cache.journal.segment_bytes == 1 << 20
        assert cache.reporter.config == ReporterConfig.from_settings(settings, "agents")
        assert cache.reporter.prefix.startswith("house.agents.")
        assert writer.schema_check is not None  # whisper declares whisper_files
    finally:
        cache.database.close()


@pytest.fixture
def no_files():
    STORAGE_BACKENDS.add("test-no-files", MemoryBackend)
    yield
    STORAGE_BACKENDS.discard("test-no-files")


def test_no_schema_check_for_a_backend_without_whisper_files(tmp_path, no_files):
    cache, _instance = assemble(tmp_path, DATABASE="test-no-files")
    assert isinstance(cache.database, PluginBackend)
    assert cache.database.capabilities == Capabilities()
    assert cache.writer.schema_check is None


def test_sighup_rates_reach_the_writer_s_config(tmp_path):
    cache, instance = assemble(tmp_path, MAX_UPDATES_PER_SECOND=300)
    try:
        assert cache.writer.config.max_updates_per_second_on_shutdown == 300.0
        instance.settings["MAX_UPDATES_PER_SECOND"] = 450
        instance.write_conf()
        lines = cache.reload()
        assert "SIGHUP: MAX_UPDATES_PER_SECOND changed from 300 to 450" in lines, lines
        assert cache.writer.config == cache.writer_config
        assert cache.writer.config.max_updates_per_second == 450.0
        assert cache.writer.config.max_updates_per_second_on_shutdown == 450.0
        assert cache.writer.update_limiter.fill_rate == 450.0
    finally:
        cache.database.close()
