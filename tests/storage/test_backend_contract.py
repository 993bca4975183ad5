"""The storage backend and rate limiter contracts (carbon.storage.backend,
carbon.writer.ratelimit): what a backend does beyond the base calls is declared in its
``capabilities``; a plugin written without the protocols (duck-typed, as carbon 1.1.10's
plugins are) is wrapped once and driven through the protocols' defaults."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from carbon.cache.store import MetricCache
from carbon.cache.strategies import StrategyConfig, make_strategy
from carbon.config.schemas import SchemaFiles
from carbon.config.defaults import DEFAULTS
from carbon.config.errors import ConfigError
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.logs import CarbonLog
from carbon.plugins import RATE_LIMITERS, STORAGE_BACKENDS
from carbon.storage.backend import (Capabilities, PluginBackend, StorageBackend, as_backend,
                                    open_database)
from carbon.storage.emulated_disk import EmulatedDiskDatabase
from carbon.storage.whisper_backend import WhisperConfig, WhisperDatabase
from carbon.writer.ratelimit import CreateTokens, PluginLimiter, TokenBucket, make_limiter
from carbon.writer.writer import Writer, WriterConfig
from tests.support import MemoryBackend

NOW = int(time.time()) // 60 * 60


def _writer(root: Path, database: StorageBackend, **overrides: object) -> tuple[Writer,
                                                                                 MetricCache,
                                                                                 Stats]:
    (root / "conf").mkdir(parents=True)
    (root / "conf" / "storage-schemas.conf").write_text(
        "[default]\npattern = .*\nretentions = 60s:1d\n")
    values: dict[str, object] = dict(LOCAL_DATA_DIR=str(root / "whisper"), LOG_CREATES=False,
                                     MAX_UPDATES_PER_SECOND=float("inf"),
                                     MAX_CREATES_PER_MINUTE=float("inf"))
    values.update(overrides)
    settings = Settings(**values)
    cache, stats = MetricCache(), Stats()
    writer = Writer(cache, make_strategy("sorted", cache, StrategyConfig.from_settings(settings)),
                    database, SchemaFiles(str(root / "conf")), WriterConfig.from_settings(settings),
                    stats,
                    CarbonLog(logdir=str(root / "log")))
    return writer, cache, stats


def _drain(writer: Writer, cache: MetricCache) -> None:
    deadline = time.monotonic() + 30
    while cache or writer.creator.ready or writer.returned or writer.creator.busy:
        writer.write_some()
        assert time.monotonic() < deadline, "the writer did not drain the cache"


@pytest.mark.parametrize("creates_per_minute", [float("inf"), 6000.0])
def test_a_plugin_with_only_the_base_calls_stores_every_point(tmp_path, creates_per_minute):
    """Looked up and created once a metric (the defaults of exists_many / create_many),
    written with ``write`` (write_batch's default leaves every item to it)."""
    plugin = MemoryBackend(Settings())
    database = as_backend(plugin)
    assert isinstance(database, PluginBackend) and database.capabilities == Capabilities()
    writer, cache, stats = _writer(tmp_path, database,
                                   MAX_CREATES_PER_MINUTE=creates_per_minute)
    metrics = ["duck.m%02d" % index for index in range(20)]
    cache.add_batch([(metric, float(NOW - 60 * k), float(k))
                     for metric in metrics for k in (3, 2, 1)])
    _drain(writer, cache)
    assert plugin.files == {metric: {NOW - 180.0: 3.0, NOW - 120.0: 2.0, NOW - 60.0: 1.0}
                            for metric in metrics}
    assert plugin.creates == 20
    assert stats.get("creates") == 20 and stats.get("committedPoints") == 60
    assert stats.get("errors") == 0 and not cache.writing
    assert database.get_filesystem_path("duck.m00") is None and database.descriptor_capacity == 0
    database.close()  # the plugin has no close: nothing to do


def test_a_plugin_s_own_optional_calls_and_capabilities_are_used(tmp_path):
    class Batched(MemoryBackend):
        capabilities = Capabilities(writes_on_create=True)

        def __init__(self, settings: Settings) -> None:
            super().__init__(settings)
            self.looked: list[list[str]] = []

        def exists_many(self, metrics):
            self.looked.append(list(metrics))
            return [metric in self.files for metric in metrics]

        def get_filesystem_path(self, metric):
            return "/nowhere/%s.wsp" % metric

    plugin = Batched(Settings())
    database = as_backend(plugin)
    assert database.capabilities == Capabilities(writes_on_create=True)  # as declared
    assert database.exists_many(["a", "b"]) == [False, False]
    assert plugin.looked == [["a", "b"]]
    assert database.get_filesystem_path("a.b") == "/nowhere/a.b.wsp"
    assert database.create_many([("a", [(60, 10)], None, None)] * 2)[1].__class__ \
        is FileExistsError
    assert database.files == {"a": {}}  # other attributes: the plugin's


def test_backends_declare_what_they_do(tmp_path):
    settings = Settings(LOCAL_DATA_DIR=str(tmp_path))
    whisper = WhisperDatabase.from_settings(settings)
    assert as_backend(whisper) is whisper
    assert whisper.capabilities == Capabilities(writes_on_create=True, overlaps_creates=True,
                                                whisper_files=True)
    assert EmulatedDiskDatabase.capabilities == Capabilities(writes_on_create=True,
                                                             whisper_files=True)

    class OwnCreates(WhisperDatabase):  # called as create_many: no longer split or fed
        def create_many(self, requests, points=None, now=None):
            return super().create_many(requests, points, now)

    class Declared(OwnCreates):
        capabilities = Capabilities(overlaps_creates=True)

        def create_many(self, requests, points=None, now=None):
            return super().create_many(requests, points, now)

    assert OwnCreates.capabilities == Capabilities(whisper_files=True)  # still its files
    assert Declared.capabilities == Capabilities(overlaps_creates=True)
    whisper.close()


class DuckLimiter:
    """A rate-limiter plugin with ``take`` and ``set_rate`` only."""

    def __init__(self, capacity: float, fill_rate: float) -> None:
        self.taken = 0

    def take(self, cost: float = 1.0, blocking: bool = True) -> bool:
        self.taken += cost  # tokens, not calls: the writer pays for a batch at once
        return True

    def set_rate(self, capacity: float, fill_rate: float) -> None:
        pass


class TellingLimiter(DuckLimiter):
    unlimited = False

    def available(self) -> float:
        return 3.0

    def seconds_until(self, cost: float = 1.0) -> float:
        return 0.25


@pytest.fixture
def limiters():
    RATE_LIMITERS.add("test-duck", DuckLimiter)
    RATE_LIMITERS.add("test-telling", TellingLimiter)
    yield
    RATE_LIMITERS.discard("test-duck")
    RATE_LIMITERS.discard("test-telling")


def test_a_limiter_plugin_gets_the_defaults_it_does_not_declare(limiters):
    assert isinstance(make_limiter("token_bucket", 5.0), TokenBucket)
    duck = make_limiter("test-duck", 5.0)
    assert isinstance(duck, PluginLimiter) and not duck.unlimited
    tokens = CreateTokens(duck)
    assert tokens.take() and duck.plugin.taken == 1
    assert tokens.free() == 1.0 and tokens.seconds_until() == 0.0  # tried again soon
    telling = CreateTokens(make_limiter("test-telling", 5.0))
    assert telling.free() == 3.0 and telling.seconds_until() == 0.25


def test_the_writer_drains_through_a_limiter_plugin(tmp_path, limiters):
    plugin = MemoryBackend(Settings())
    writer, cache, stats = _writer(tmp_path, as_backend(plugin), RATE_LIMITER="test-duck",
                                   MAX_UPDATES_PER_SECOND=1000.0)
    assert isinstance(writer.update_limiter, PluginLimiter)
    cache.add_batch([("limited.%d" % index, float(NOW - 60), 1.0) for index in range(5)])
    _drain(writer, cache)
    assert sorted(plugin.files) == ["limited.%d" % index for index in range(5)]
    assert writer.update_limiter.plugin.taken >= 5  # one update token a write at least


class ForgettingBackend(MemoryBackend):
    """A duck-typed plugin with its own ``forget`` and a file path a metric."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.settings = settings
        self.forgotten: list[str] = []

    def forget(self, metrics):
        self.forgotten.extend(metrics)

    def get_filesystem_path(self, metric):
        return "/nowhere/%s.wsp" % metric


class DeclaredBackend(StorageBackend):
    """A plugin that subclasses the protocol and keeps carbon's constructor (settings)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def exists(self, metric):
        return False

    def create(self, metric, retentions, xfilesfactor, aggregation_method):
        pass

    def write(self, metric, datapoints, now=None):
        return 0

    def get_metadata(self, metric, key):
        return None

    def set_metadata(self, metric, key, value):
        return None


@pytest.fixture
def backends():
    STORAGE_BACKENDS.add("test-duck", ForgettingBackend)
    STORAGE_BACKENDS.add("test-declared", DeclaredBackend)
    yield
    STORAGE_BACKENDS.discard("test-duck")
    STORAGE_BACKENDS.discard("test-declared")


def test_open_database_gives_each_backend_what_its_contract_says(tmp_path, backends):
    """Built-ins get their typed config (never the Settings); a plugin subclassing the
    protocol is made by its ``from_settings`` (by default called with the settings, as
    carbon 1.1.10 calls its database plugins), a duck-typed one is called with the
    settings and wrapped; what a duck-typed one says where its files are is used."""
    settings = Settings(LOCAL_DATA_DIR=str(tmp_path), WRITER_KNOWN_FILES=7,
                        WHISPER_FD_CACHE_IDLE=12, DATABASE="whisper")
    whisper = open_database(settings)
    assert type(whisper) is WhisperDatabase
    assert whisper.config == WhisperConfig.from_settings(settings)
    assert whisper.config.known_files == 7 and whisper.config.fd_cache_idle == 12.0
    assert whisper.config.fd_cache_size == DEFAULTS["WHISPER_FD_CACHE_SIZE"]
    whisper.close()

    declared = open_database(Settings(DATABASE="test-declared"))
    assert type(declared) is DeclaredBackend and declared.settings["DATABASE"] == "test-declared"
    assert declared.capabilities == Capabilities()
    declared.forget(["a"])  # the protocol's default: nothing held

    duck = open_database(Settings(DATABASE="test-duck"))
    assert isinstance(duck, PluginBackend) and duck.settings["DATABASE"] == "test-duck"
    assert duck.capabilities == Capabilities(whisper_files=True)
    duck.forget(["a.b", "c"])
    assert duck.plugin.forgotten == ["a.b", "c"]

    with pytest.raises(ConfigError) as raised:
        open_database(Settings(DATABASE="ceres", config_file="/etc/carbon/carbon.conf"))
    assert str(raised.value).startswith("/etc/carbon/carbon.conf")
    assert "DATABASE" in str(raised.value)
    assert "No database plugin implemented for 'ceres' (known: " in str(raised.value)


def test_the_writer_resumes_through_the_backend_s_declared_forget(tmp_path):
    """``Writer.resume`` calls the protocol's ``forget`` (no probe): a duck-typed
    plugin's own is forwarded; the default does nothing."""
    plugin = ForgettingBackend(Settings())
    writer, _cache, _stats = _writer(tmp_path, as_backend(plugin))
    assert writer.pause(["x.y"]) == []
    writer.resume(["x.y"])
    assert plugin.forgotten == ["x.y"] and not writer.paused
