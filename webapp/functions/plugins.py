"""FUNCTION_PLUGINS: render functions added by modules named in the settings file.

As in graphite-web, a plugin module exports ``SeriesFunctions`` and/or ``PieFunctions``,
dicts of name -> function. A series function is called as
``func(requestContext, seriesList, *args)``; its optional ``group`` attribute groups it
in /functions and its optional ``params`` (a list of ``webapp.functions.registry.Param``)
makes its arguments checked like the built-in ones.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from carbon.config.errors import ConfigError
from carbon.plugins import Registry
from webapp.functions.registry import NO_TRAITS, PIE_FUNCTIONS, Param, RenderFunction
from webapp.plugins import RENDER_FUNCTIONS


class PluginFunction:
    """A plugin function without a parameter schema: called as given, not validated."""

    def __init__(self, name: str, group: str, func: Callable[..., Any]) -> None:
        self.name = name
        self.group = group
        self.params: list[Param] = []
        self.func = func
        self.aggregator = False
        self.traits = NO_TRAITS

    def validate(self, args: list[Any], kwargs: dict[str, Any]
                 ) -> tuple[list[Any], dict[str, Any]]:
        """No schema: the arguments as given."""
        return args, kwargs

    def __call__(self, requestContext: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        return self.func(requestContext, *args, **kwargs)


def _wrap(name: str, func: Any, module: str) -> Any:
    if not callable(func):
        raise ConfigError("%s.%s is not callable" % (module, name), key="FUNCTION_PLUGINS")
    # graphite-web's plugin API: optional attributes of the plugin's function
    group = getattr(func, "group", None) or "Ungrouped"
    params = getattr(func, "params", None)
    if params and all(isinstance(p, Param) for p in params):
        return RenderFunction(name, group, list(params), func)
    return PluginFunction(name, group, func)


def _add(registry: Registry, name: str, entry: Any, module: str) -> None:
    if name in registry:
        current = registry.get(name)
        if current.func is entry.func:
            return  # the same plugin loaded again (a second app in this process)
        raise ConfigError("function %r of plugin %s is already defined" % (name, module),
                          key="FUNCTION_PLUGINS")
    registry.add(name, entry)


def load_function_plugins(modules: list[str], path: str | None = None) -> list[str]:
    """Import each module and register its functions; returns the names added.

    A module that cannot be imported, or a name already taken, is a ConfigError naming
    FUNCTION_PLUGINS (graphite-web logs and goes on; we refuse to start half-configured).
    """
    added = []
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except Exception as err:
            raise ConfigError("cannot import function plugin %r: %s: %s"
                              % (module_name, type(err).__name__, err), path,
                              key="FUNCTION_PLUGINS") from None
        for attr, registry in (("SeriesFunctions", RENDER_FUNCTIONS),
                               ("PieFunctions", PIE_FUNCTIONS)):
            # graphite-web's plugin API: a module exports either dict or both
            for name, func in dict(getattr(module, attr, None) or {}).items():
                _add(registry, name, _wrap(name, func, module_name), module_name)
                added.append(name)
    return added
