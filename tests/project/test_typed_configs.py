"""Components get a small frozen, typed config, never the whole Settings (issue 27).

Read from the code: every constructor of the cache side's components (and every
built-in write strategy) is inspected, and fails the test if a parameter is named
``settings`` or annotated ``Settings`` or ``Any``; every config is a frozen dataclass
built by ``from_settings``, which reads only carbon.conf keys with a default in
``DEFAULTS`` (or the few the loader derives), so a config cannot carry a default of
its own."""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from typing import Any, Callable

import pytest

from carbon.cache.journal import Journal, JournalConfig
from carbon.cache.sink import CacheSink, CacheSinkConfig
from carbon.cache.strategies import StrategyConfig, make_strategy
from carbon.carbonlink.server import CarbonLinkConfig, CarbonLinkHandler
from carbon.config.defaults import DEFAULTS, PATH_KEYS
from carbon.config.settings import Settings
from carbon.instrumentation.reporter import Reporter, ReporterConfig
from carbon.plugins import WRITE_STRATEGIES
from carbon.storage.emulated_disk import EmulatedDiskDatabase
from carbon.storage.whisper_backend import WhisperConfig, WhisperDatabase
from carbon.writer.creator import Creator, CreatorConfig
from carbon.writer.schemacheck import SchemaCheck
from carbon.writer.tagfeed import TagFeed, TagFeedConfig
from carbon.writer.writer import Writer, WriterConfig

COMPONENTS: list[Callable[..., object]] = [
    Writer, Creator, CacheSink, Journal, TagFeed, WhisperDatabase, EmulatedDiskDatabase,
    Reporter, CarbonLinkHandler, SchemaCheck, make_strategy,
]

CONFIGS = [WriterConfig, CreatorConfig, StrategyConfig, CacheSinkConfig, JournalConfig,
           TagFeedConfig, CarbonLinkConfig, WhisperConfig]

# keys carbon.config.loader sets itself (paths, the command line), not carbon.conf defaults
DERIVED = set(PATH_KEYS) | {"program", "instance", "config_file", "CACHE_SIZE_LOW_WATERMARK"}


def _mentions(annotation: object, wanted: object) -> bool:
    """Whether ``wanted`` is ``annotation`` or one of its arguments (unions, generics)."""
    if annotation is wanted:
        return True
    return any(_mentions(argument, wanted) for argument in typing.get_args(annotation))


def _loose(annotation: object) -> bool:
    """Whether ``annotation`` takes anything: Any, or a union with Any in it."""
    return annotation is Any or (typing.get_origin(annotation) in (typing.Union,
                                                                   types.UnionType)
                                 and Any in typing.get_args(annotation))


def settings_parameters(component: Callable[..., object]) -> list[str]:
    """The parameters of ``component``'s constructor (or of the function) that take the
    whole Settings: named ``settings``, annotated with Settings (also inside a union or
    generic) or with Any (which takes it too)."""
    function = component.__init__ if inspect.isclass(component) else component
    hints = typing.get_type_hints(function)
    found = []
    for name in inspect.signature(function).parameters:
        if name in ("self", "cls"):
            continue
        hint = hints.get(name)
        if name == "settings" or _mentions(hint, Settings) or _loose(hint):
            found.append("%s(%s: %s)" % (getattr(component, "__qualname__", component), name,
                                         hint))
    return found


def strategies() -> list[type]:
    return [WRITE_STRATEGIES.get(name) for name in ("naive", "sorted", "timesorted", "max",
                                                    "bucketmax")]


@pytest.mark.parametrize("component", COMPONENTS + strategies(),
                         ids=lambda component: component.__qualname__)
def test_no_component_constructor_takes_the_settings(component):
    assert settings_parameters(component) == []


def test_the_check_catches_a_constructor_that_takes_settings():
    """The inspection above fails for the forms it is there to catch."""

    class Named:
        def __init__(self, cache: int, settings: dict[str, int]) -> None: ...

    class Annotated:
        def __init__(self, conf: Settings | None = None) -> None: ...

    class Loose:
        def __init__(self, conf: Any) -> None: ...

    class Optional:
        def __init__(self, conf: Any | None = None) -> None: ...

    class Typed:
        def __init__(self, config: CacheSinkConfig, path_of: Callable[[str], Any]) -> None: ...

    assert settings_parameters(Named) and settings_parameters(Annotated)
    assert settings_parameters(Loose) and settings_parameters(Optional)
    assert settings_parameters(Typed) == []


class ReadKeys(Settings):
    """Settings that remember every key read."""

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        object.__setattr__(self, "read", set())

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda config: config.__name__)
def test_configs_are_frozen_and_read_only_keys_with_a_default(config, tmp_path):
    assert dataclasses.is_dataclass(config) and config.__dataclass_params__.frozen
    settings = ReadKeys(LOCAL_DATA_DIR=str(tmp_path), STORAGE_DIR=str(tmp_path))
    built = config.from_settings(settings)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, dataclasses.fields(config)[0].name, None)
    assert settings.read, "from_settings read nothing"
    assert settings.read <= set(DEFAULTS) | DERIVED, \
        "keys without a default in DEFAULTS: %s" % (settings.read - set(DEFAULTS) - DERIVED)


def test_reporter_config_is_frozen_and_reads_the_prefix():
    settings = ReadKeys(CARBON_METRIC_PREFIX="house", instance="b")
    config = ReporterConfig.from_settings(settings, "agents")
    assert config.prefix.startswith("house.agents.") and config.prefix.endswith("-b")
    assert settings.read == {"CARBON_METRIC_PREFIX", "instance"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.prefix = "x"  # type: ignore[misc]


def test_configs_carry_the_settings_values_and_carbon_s_defaults(tmp_path):
    """A config made from default Settings holds DEFAULTS' values; a value set in the
    settings is the one the config holds."""
    plain = Settings(LOCAL_DATA_DIR=str(tmp_path))
    writer = WriterConfig.from_settings(plain)
    assert writer.max_updates_per_second == float(DEFAULTS["MAX_UPDATES_PER_SECOND"])
    assert writer.max_updates_per_second_on_shutdown == writer.max_updates_per_second
    assert writer.known_files == DEFAULTS["WRITER_KNOWN_FILES"]
    assert writer.creator.create_threads == DEFAULTS["CREATE_THREADS"]
    assert WhisperConfig.from_settings(plain).fd_cache_size == DEFAULTS["WHISPER_FD_CACHE_SIZE"]
    assert TagFeedConfig.from_settings(plain).url == \
        DEFAULTS["GRAPHITE_URL"].rstrip("/") + "/tags/tagMultiSeries"
    assert CarbonLinkConfig.from_settings(plain).port == DEFAULTS["CACHE_QUERY_PORT"]
    assert CacheSinkConfig.from_settings(plain).low_watermark == \
        float(DEFAULTS["MAX_CACHE_SIZE"]) * 0.95
    set_ = Settings(LOCAL_DATA_DIR=str(tmp_path), MAX_UPDATES_PER_SECOND=40.0,
                    MAX_UPDATES_PER_SECOND_ON_SHUTDOWN=900.0, LOG_CREATES=False,
                    MAX_CACHE_SIZE=1000.0, CACHE_SIZE_LOW_WATERMARK=600.0,
                    MIN_TIMESTAMP_LAG=30, CACHE_JOURNAL_DIR=str(tmp_path / "j"))
    writer = WriterConfig.from_settings(set_)
    assert (writer.max_updates_per_second, writer.max_updates_per_second_on_shutdown) == \
        (40.0, 900.0)
    assert writer.creator.log_creates is False
    assert CacheSinkConfig.from_settings(set_) == CacheSinkConfig(1000.0, 600.0, True)
    assert StrategyConfig.from_settings(set_).min_timestamp_lag == 30.0
    assert JournalConfig.from_settings(set_).directory == str(tmp_path / "j")
    journal = JournalConfig.from_settings(Settings(STORAGE_DIR=str(tmp_path),
                                                   program="carbon-cache", instance="b"))
    assert journal.directory == str(tmp_path / "cache-journal" / "carbon-cache-b")
