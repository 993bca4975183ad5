"""The storage backend contract (``DATABASE`` in carbon.conf, registry STORAGE_BACKENDS).

``StorageBackend`` is a protocol in two parts. The base contract is what every backend
implements (carbon 1.1.10's TimeSeriesDatabase, in this project's names): ``exists``,
``create``, ``write``, ``get_metadata``, ``set_metadata``. The rest are optional calls
whose defaults, written here on the base contract, are what the writer and creator did
for a backend without them: ``exists_many`` and ``create_many`` call the base once a
metric, ``write_batch`` leaves every item to ``write``, ``found_by_create`` says no,
``get_filesystem_path`` None (no files), ``descriptor_capacity`` 0, ``close`` nothing.
A backend subclasses the protocol to get them and overrides what it does better.

What changes how the writer and creator drive a backend is declared in
``capabilities`` (a frozen ``Capabilities``), never found by probing:
``writes_on_create`` (its ``create_many(requests, points)`` writes each new file's first
points in the create, reported as the seconds it took), ``overlaps_creates``
(``prepare_create_many`` splits a create batch so its file-system calls run on another
thread) and ``whisper_files`` (a metric is a whisper file at ``get_filesystem_path``:
the cache compares its header with the schema rules and mends an interrupted create).

A backend is made once, when the daemon is assembled (``open_database``): a class that
subclasses the protocol through its ``from_settings`` (by default ``cls(settings)``;
the built-in ones build their own frozen config from the settings there, so their
constructors never see the whole Settings); any other plugin (duck-typed, as carbon
1.1.10's) is called with the settings, as carbon calls its database plugins, and
wrapped once (``as_backend``): its own optional calls are used where it has them, the
defaults elsewhere, and its ``capabilities`` if it declares them.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol, Sequence, cast

from carbon.config.errors import ConfigError
from carbon.config.settings import Settings
from carbon.plugins import STORAGE_BACKENDS

__all__ = ["Capabilities", "CreateJob", "CreateRequest", "CreateResult", "StorageBackend",
           "as_backend", "open_database"]

#: (metric, retentions as (seconds per point, points), xFilesFactor, aggregation method);
#: None picks the backend's default
CreateRequest = tuple[str, Sequence[tuple[int, int]], float | None, str | None]
#: per create request: None (created), the seconds a create that wrote the points took,
#: or the error
CreateResult = Exception | float | None


@dataclass(frozen=True)
class Capabilities:
    """What a storage backend declares it does beyond the base contract (all off)."""

    writes_on_create: bool = False
    overlaps_creates: bool = False
    whisper_files: bool = False


class CreateJob(Protocol):
    """A create batch ``prepare_create_many`` made ready: ``run`` makes the files (any
    thread), ``finish`` books them (the preparing thread) and gives the results."""

    def run(self) -> None: ...

    def finish(self) -> list[CreateResult]: ...


class StorageBackend(Protocol):
    """The contract between the writer, creator, carbonlink and a storage backend."""

    capabilities: Capabilities = Capabilities()

    @classmethod
    def from_settings(cls, settings: Settings) -> StorageBackend:
        """The backend DATABASE names, made once at assembly. By default the class is
        called with the settings (carbon 1.1.10's plugin contract); a backend with a
        typed config builds it here and passes only that."""
        # the protocol declares no constructor: a subclass that keeps carbon's takes settings
        return cast("Callable[[Settings], StorageBackend]", cls)(settings)

    # -- the base contract --------------------------------------------------------------
    def exists(self, metric: str) -> bool: ...

    def create(self, metric: str, retentions: Sequence[tuple[int, int]],
               xfilesfactor: float | None, aggregation_method: str | None) -> None: ...

    def write(self, metric: str, datapoints: Iterable[tuple[float, float]],
              now: int | None = None) -> int:
        """Store the metric's points; how many were too old to store."""
        ...

    # metadata values are whatever the backend keeps (whisper: the aggregation method)
    def get_metadata(self, metric: str, key: str) -> object: ...

    def set_metadata(self, metric: str, key: str, value: object) -> object:
        """Set metadata ``key``; the old value."""
        ...

    # -- optional calls, defaults on the base contract ------------------------------------
    def exists_many(self, metrics: Sequence[str]) -> list[bool]:
        return [self.exists(metric) for metric in metrics]

    def found_by_create(self, metric: str) -> bool:
        """Whether creating the metric's file reports an existing one (FileExistsError),
        so the creator may create without looking first."""
        return False

    def create_many(self, requests: Sequence[CreateRequest],
                    points: Sequence[array[float] | None] | None = None, now: int | None = None
                    ) -> list[CreateResult]:
        """Per request None or its error (``points``: only with ``writes_on_create``)."""
        results: list[CreateResult] = []
        for metric, retentions, xff, method in requests:
            try:
                self.create(metric, retentions, xff, method)
            except Exception as exc:
                results.append(exc)
            else:
                results.append(None)
        return results

    def prepare_create_many(self, requests: Sequence[CreateRequest],
                            points: Sequence[array[float] | None] | None = None,
                            now: int | None = None) -> CreateJob:
        """``create_many`` as a job (used with ``overlaps_creates``; by default the whole
        create happens in ``finish``, on the preparing thread)."""
        return _CreateOnFinish(self, requests, points, now)

    def write_batch(self, items: Sequence[tuple[str, array[float]]],
                    now: int | None = None) -> list[float | None]:
        """Per item the seconds its write took, or None: left to ``write``."""
        return [None] * len(items)

    def get_filesystem_path(self, metric: str) -> str | None:
        """The metric's file, or None for a backend that keeps no file a metric."""
        return None

    @property
    def descriptor_capacity(self) -> int:
        """File descriptors the backend may hold open at once."""
        return 0

    def forget(self, metrics: Iterable[str]) -> None:
        """Drop what the backend holds for ``metrics``' files (a resize replaced them:
        descriptors, headers); nothing by default."""

    def close(self) -> None:
        """Release what the backend holds open (it stays usable)."""


class _CreateOnFinish:
    """The default CreateJob: nothing to do off the preparing thread."""

    def __init__(self, backend: StorageBackend, requests: Sequence[CreateRequest],
                 points: Sequence[array[float] | None] | None, now: int | None) -> None:
        self.backend, self.requests, self.points, self.now = backend, requests, points, now

    def run(self) -> None:
        pass

    def finish(self) -> list[CreateResult]:
        return self.backend.create_many(self.requests, self.points, self.now)


def open_database(settings: Settings) -> StorageBackend:
    """The storage backend carbon.conf's DATABASE names, made from ``settings`` (see the
    module docstring); ConfigError naming the key and the known backends otherwise."""
    name = settings["DATABASE"]
    if name not in STORAGE_BACKENDS:
        raise ConfigError("No database plugin implemented for '%s' (known: %s)"
                          % (name, ", ".join(STORAGE_BACKENDS.names())),
                          settings.get("config_file"), key="DATABASE")
    plugin = STORAGE_BACKENDS.get(name)
    if isinstance(plugin, type) and StorageBackend in plugin.__mro__:
        return cast("type[StorageBackend]", plugin).from_settings(settings)
    return as_backend(plugin(settings))


def as_backend(plugin: object) -> StorageBackend:
    """``plugin`` (a STORAGE_BACKENDS plugin's instance) as a StorageBackend: itself if
    it subclasses the protocol, else wrapped by ``PluginBackend``."""
    if StorageBackend in type(plugin).__mro__:
        return cast(StorageBackend, plugin)
    return PluginBackend(plugin)


class PluginBackend(StorageBackend):
    """A backend plugin written without this protocol (duck-typed, as carbon 1.1.10's
    plugins are): the base contract forwarded, its own optional calls where it has them
    (looked up once, here), the protocol's defaults elsewhere."""

    def __init__(self, plugin: Any) -> None:  # Any: a third-party object, duck-typed
        self.plugin = plugin
        # A plugin loaded by entry point: what it has is read once here, never per call.
        self._own = {name: getattr(plugin, name) for name in _OPTIONAL if hasattr(plugin, name)}
        declared = getattr(plugin, "capabilities", None)
        # undeclared: its files are taken for whisper's where it says where they are
        self.capabilities = declared if isinstance(declared, Capabilities) else Capabilities(
            whisper_files="get_filesystem_path" in self._own)

    def __getattr__(self, name: str) -> Any:  # anything else the plugin has
        return getattr(self.plugin, name)

    def exists(self, metric: str) -> bool:
        return bool(self.plugin.exists(metric))

    def create(self, metric: str, retentions: Sequence[tuple[int, int]],
               xfilesfactor: float | None, aggregation_method: str | None) -> None:
        self.plugin.create(metric, retentions, xfilesfactor, aggregation_method)

    def write(self, metric: str, datapoints: Iterable[tuple[float, float]],
              now: int | None = None) -> int:
        dropped = self.plugin.write(metric, datapoints) if now is None else \
            self.plugin.write(metric, datapoints, now)
        return int(dropped or 0)

    def get_metadata(self, metric: str, key: str) -> object:
        value: object = self.plugin.get_metadata(metric, key)
        return value

    def set_metadata(self, metric: str, key: str, value: object) -> object:
        old: object = self.plugin.set_metadata(metric, key, value)
        return old

    def exists_many(self, metrics: Sequence[str]) -> list[bool]:
        own = self._own.get("exists_many")
        return list(own(metrics)) if own is not None else super().exists_many(metrics)

    def found_by_create(self, metric: str) -> bool:
        own = self._own.get("found_by_create")
        return bool(own(metric)) if own is not None else False

    def create_many(self, requests: Sequence[CreateRequest],
                    points: Sequence[array[float] | None] | None = None, now: int | None = None
                    ) -> list[CreateResult]:
        own = self._own.get("create_many")
        if own is None:
            return super().create_many(requests, points, now)
        return list(own(requests) if points is None else own(requests, points))

    def prepare_create_many(self, requests: Sequence[CreateRequest],
                            points: Sequence[array[float] | None] | None = None,
                            now: int | None = None) -> CreateJob:
        own = self._own.get("prepare_create_many")
        if own is None:
            return super().prepare_create_many(requests, points, now)
        job: CreateJob = own(requests, points, now)
        return job

    def write_batch(self, items: Sequence[tuple[str, array[float]]],
                    now: int | None = None) -> list[float | None]:
        own = self._own.get("write_batch")
        return list(own(items)) if own is not None else [None] * len(items)

    def get_filesystem_path(self, metric: str) -> str | None:
        own = self._own.get("get_filesystem_path")
        return str(own(metric)) if own is not None else None

    @property
    def descriptor_capacity(self) -> int:
        return int(getattr(self.plugin, "descriptor_capacity", 0))  # a plugin's, if any

    def forget(self, metrics: Iterable[str]) -> None:
        own = self._own.get("forget")
        if own is not None:
            own(metrics)

    def close(self) -> None:
        own = self._own.get("close")
        if own is not None:
            own()


_OPTIONAL = ("exists_many", "found_by_create", "create_many", "prepare_create_many",
             "write_batch", "get_filesystem_path", "forget", "close")
