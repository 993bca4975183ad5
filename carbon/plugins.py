"""The plugin layer: explicit registries for every tuning hook.

Each registry maps a name (as written in carbon.conf) to a class or function.
Built-in plugins live in the modules listed per registry and are imported the
first time the registry is looked up; users add their own through the entry
point group named by the registry (for example ``carbon.write_strategies``).
Nothing is imported or scanned at import time.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any, Callable, Iterator

from carbon.config.errors import ConfigError


class Registry:
    """A named set of plugins, filled lazily from built-in modules and entry points."""

    def __init__(self, kind: str, group: str, builtin_modules: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self.group = group
        self._builtin_modules = builtin_modules
        self._plugins: dict[str, Any] = {}
        self.broken: dict[str, str] = {}  # entry point name -> why it did not load
        self._loaded = False

    def register(self, name: str) -> Callable[[Any], Any]:
        """Decorator: ``@WRITE_STRATEGIES.register("sorted")``."""
        def add(obj: Any) -> Any:
            self._plugins[name] = obj
            return obj
        return add

    def add(self, name: str, obj: Any) -> None:
        self._plugins[name] = obj

    def discard(self, name: str) -> None:
        """Forget ``name`` (a plugin unloaded, e.g. by a test)."""
        self._plugins.pop(name, None)

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for module in self._builtin_modules:
            importlib.import_module(module)
        for ep in entry_points(group=self.group):
            if ep.name in self._plugins:
                continue
            try:
                self._plugins[ep.name] = ep.load()
            except Exception as err:  # one broken package must not hide the others
                self.broken[ep.name] = "%s = %s: %s: %s" % (
                    ep.name, ep.value, type(err).__name__, err)

    def _unknown(self, name: str) -> str:
        text = "unknown %s %r (known: %s)" % (self.kind, name, ", ".join(sorted(self._plugins)))
        if name in self.broken:
            text += "; its entry point failed to load: %s" % self.broken[name]
        return text

    def get(self, name: str) -> Any:
        """The plugin called ``name``; KeyError naming the known ones otherwise."""
        self._load()
        try:
            return self._plugins[name]
        except KeyError:
            raise KeyError(self._unknown(name)) from None

    def resolve(self, name: str, key: str, path: str | None = None) -> Any:
        """The plugin a carbon.conf ``key`` names; ConfigError naming the key and the known
        names (and why an entry point of that name failed to load) otherwise."""
        self._load()
        if name not in self._plugins:
            raise ConfigError(self._unknown(name), path, key=key)
        return self._plugins[name]

    def names(self) -> list[str]:
        self._load()
        return sorted(self._plugins)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._plugins

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


WRITE_STRATEGIES = Registry("write strategy", "carbon.write_strategies",
                            ("carbon.cache.strategies",))
RATE_LIMITERS = Registry("rate limiter", "carbon.rate_limiters", ("carbon.writer.ratelimit",))
HASH_RINGS = Registry("hash ring", "carbon.hash_rings", ("carbon.hashing",))
ROUTERS = Registry("relay method", "carbon.routers",
                   ("carbon.relay.routing", "carbon.relay.aggregated"))
STORAGE_BACKENDS = Registry("storage backend", "carbon.storage_backends",
                            ("carbon.storage.whisper_backend",
                             "carbon.storage.emulated_disk"))
