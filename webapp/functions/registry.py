"""Declaring render functions: parameter schema, registration and /functions metadata."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Protocol, TypeVar

from webapp.plugins import PIE_FUNCTIONS, RENDER_FUNCTIONS
from webapp.render.attime import parse_time_offset
from webapp.render.errors import InputParameterError
from webapp.render.series import TimeSeries

AGG_FUNCS = ['average', 'avg_zero', 'median', 'sum', 'min', 'max', 'diff', 'stddev',
             'count', 'range', 'multiply', 'last']
AGG_FUNC_ALIASES = ['rangeOf', 'avg', 'total', 'current']

PARAM_TYPES = frozenset([
    'aggFunc', 'aggOrSeriesFunc', 'any', 'boolean', 'date', 'float', 'integer', 'interval',
    'intOrInterval', 'intOrInf', 'node', 'nodeOrTag', 'series', 'seriesList', 'seriesLists',
    'string', 'tag',
])


class Param:
    """One parameter in graphite-web's /functions schema."""

    __slots__ = ('name', 'type', 'required', 'default', 'multiple', '_options', 'suggestions')

    def __init__(self, name: str, type: str, required: bool = False, default: Any = None,
                 multiple: bool = False, options: Optional[list] = None,
                 suggestions: Optional[list] = None) -> None:
        if type not in PARAM_TYPES:
            raise ValueError('unknown parameter type %r for %s' % (type, name))
        self.name = name
        self.type = type
        self.required = required
        self.default = default
        self.multiple = multiple
        self._options = list(options or [])
        self.suggestions = suggestions

    @property
    def options(self) -> list:
        """Allowed values: explicit ones plus those implied by the type, sorted as strings."""
        opts = list(self._options)
        if self.type in ('aggFunc', 'aggOrSeriesFunc'):
            opts += AGG_FUNCS + AGG_FUNC_ALIASES
        if self.type == 'aggOrSeriesFunc':
            opts += aggregator_names()
        return sorted(set(opts), key=str)

    def to_json(self) -> dict[str, Any]:
        """The param dict as /functions emits it (only non-default keys)."""
        out: dict[str, Any] = {'name': self.name, 'type': self.type}
        if self.required:
            out['required'] = True
        if self.default is not None:
            out['default'] = self.default
        if self.multiple:
            out['multiple'] = True
        options = self.options
        if options:
            out['options'] = options
        if self.suggestions:
            out['suggestions'] = self.suggestions
        return out

    toJSON = to_json

    _KEYS = ('name', 'type', 'required', 'default', 'multiple', 'options', 'suggestions')

    def __getitem__(self, key: str) -> Any:
        """Dict-style access to the schema fields (``param['name']``)."""
        if key not in self._KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._KEYS else default

    def __repr__(self) -> str:
        return 'Param(%r)' % self.to_json()

    def validate(self, value: Any, func: str) -> Any:
        """Check and coerce one argument value; raise InputParameterError when invalid."""
        if value is None and (self.default is not None or not self.required):
            return value
        options = self.options
        if options and value not in options and self.type != 'aggOrSeriesFunc':
            if not (self.type == 'aggFunc' and _is_deprecated_agg(value)):
                raise InputParameterError(
                    'Invalid option specified for function "%s" parameter "%s": %r'
                    % (func, self.name, value))
        try:
            return _VALIDATORS.get(self.type, _accept)(value)
        except Exception:
            raise InputParameterError(
                'Invalid "%s" value specified for function "%s" parameter "%s": %r'
                % (self.type, func, self.name, value)) from None


def _is_deprecated_agg(value: Any) -> bool:
    return isinstance(value, str) and value.endswith('Series') and \
        value[:-6] in AGG_FUNCS + AGG_FUNC_ALIASES


def _accept(value: Any) -> Any:
    return value


def _boolean(value: Any) -> bool:
    if isinstance(value, str):
        if value.lower() in ('true', 'false'):
            return value.lower() == 'true'
        raise ValueError(value)
    if type(value) in (int, float):
        if value in (0, 1):
            return bool(value)
        raise ValueError(value)
    return bool(value)


def _integer(value: Any) -> int:
    if type(value) is float:
        raise ValueError(value)
    return int(value)


def _int_or_inf(value: Any) -> Any:
    try:
        return _integer(value)
    except (TypeError, ValueError):
        if float(value) == float('inf'):
            return float('inf')
        raise


def _interval(value: Any) -> Any:
    parse_time_offset(str(value))
    return value


def _series_list(value: Any) -> list:
    if not isinstance(value, list) or not all(isinstance(s, TimeSeries) for s in value):
        raise ValueError(value)
    return value


def _series_lists(value: Any) -> list:
    if not isinstance(value, list):
        raise ValueError(value)
    for entry in value:
        _series_list(entry)
    return value


def _agg_or_series(value: Any) -> Any:
    if value in AGG_FUNCS + AGG_FUNC_ALIASES or _is_deprecated_agg(value):
        return value
    if value in aggregator_names():
        return value
    raise ValueError(value)


_VALIDATORS: dict[str, Callable[[Any], Any]] = {
    'boolean': _boolean, 'float': float, 'integer': _integer, 'node': _integer,
    'intOrInf': _int_or_inf, 'interval': _interval, 'seriesList': _series_list,
    'seriesLists': _series_lists, 'aggOrSeriesFunc': _agg_or_series,
}


@dataclass(frozen=True)
class Traits:
    """How the evaluator may run a render function, declared with it (as carbonapi's
    FunctionDescription carries its traits); every one off by default."""

    #: its first argument, a bare path, may come as packed rows (webapp.functions.packed_rows)
    packed_input: bool = False
    #: it never reads values (renames or picks series): on a bare path the JSON writer
    #: may get its series still packed (webapp.render.evaluator)
    keeps_values: bool = False
    #: a moving window webapp.render.fused computes on packed rows: the arguments the
    #: function fixes (movingAverage: {'func': 'average'}; movingWindow: none)
    fused_window: Optional[Mapping[str, str]] = None
    #: a grouping webapp.render.fused computes on packed rows: the names of its
    #: callback and node parameters
    fused_group: Optional[tuple[str, str]] = None
    #: the aggregation (sum, average, max, min) webapp.render.fused computes on packed rows
    fused_aggregate: Optional[str] = None


NO_TRAITS = Traits()


class Function(Protocol):
    """What the evaluator and /functions use of a registered function (RenderFunction,
    or a FUNCTION_PLUGINS function without a schema). Any: arguments and results are of
    every render type (series lists, numbers, strings, nested calls' results)."""

    name: str
    group: str
    params: list[Param]
    aggregator: bool
    traits: Traits

    @property
    def func(self) -> Callable[..., Any]: ...

    def validate(self, args: list[Any], kwargs: dict[str, Any]
                 ) -> tuple[list[Any], dict[str, Any]]: ...


class RenderFunction:
    """A registered render function: ``fn.func(requestContext, *args, **kwargs)``."""

    def __init__(self, name: str, group: str, params: list[Param], func: Callable[..., Any],
                 aggregator: bool = False, traits: Traits = NO_TRAITS) -> None:
        self.name = name
        self.group = group
        self.params = params
        self.func = func
        self.aggregator = aggregator
        self.traits = traits

    def __call__(self, requestContext: dict, *args: Any, **kwargs: Any) -> Any:
        return self.func(requestContext, *args, **kwargs)

    def __repr__(self) -> str:
        return '<RenderFunction %s (%s)>' % (self.name, self.group)

    def validate(self, args: list, kwargs: dict) -> tuple[list, dict]:
        """Check arguments against the schema the way graphite-web does; returns coerced copies."""
        params = self.params
        if len(args) + len(kwargs) > len(params) and not (params and params[-1].multiple):
            raise InputParameterError('Too many parameters specified for function "%s"'
                                      % self.name)
        valid_args = [params[min(i, len(params) - 1)].validate(a, self.name)
                      for i, a in enumerate(args)]
        valid_kwargs = {}
        for param in params[len(args):]:
            value = kwargs.get(param.name)
            if value is None:
                if param.required:
                    raise InputParameterError('Missing required parameter "%s" for function "%s"'
                                              % (param.name, self.name))
                continue
            valid_kwargs[param.name] = param.validate(value, self.name)
        unexpected = [k for k in kwargs if k not in valid_kwargs]
        if unexpected:
            raise InputParameterError('Unexpected key word arguments: %s' % ', '.join(unexpected))
        return valid_args, valid_kwargs


def aggregator_names() -> list[str]:
    """Names of registered functions usable as aggregation callbacks (groupByNode etc.)."""
    return [name for name in RENDER_FUNCTIONS.names() if RENDER_FUNCTIONS.get(name).aggregator]


_F = TypeVar('_F', bound=Callable[..., Any])


def render_function(name: str, group: str, params: list[Param], aliases: Iterable[str] = (),
                    aggregator: bool = False, pie: bool = False,
                    traits: Traits = NO_TRAITS) -> Callable[[_F], _F]:
    """Decorator registering ``func`` under ``name`` (and ``aliases``) with its schema
    and its ``traits``."""
    registry = PIE_FUNCTIONS if pie else RENDER_FUNCTIONS

    def register(func: _F) -> _F:
        for each in (name, *aliases):
            registry.add(each, RenderFunction(each, group, params, func, aggregator, traits))
        return func
    return register


def signature_string(fn: RenderFunction) -> str:
    """``name(arg, kw=default, *rest)`` from the Python signature, minus requestContext."""
    sig = inspect.signature(fn.func)
    params = list(sig.parameters.values())[1:]
    cleaned = [p.replace(annotation=inspect.Parameter.empty) for p in params]
    text = str(sig.replace(parameters=cleaned, return_annotation=inspect.Signature.empty))
    return fn.name + text


def function_info(fn: RenderFunction) -> dict[str, Any]:
    """The /functions JSON entry of a registered function."""
    return {
        'name': fn.name,
        'function': signature_string(fn),
        'description': inspect.getdoc(fn.func),
        'module': fn.func.__module__,
        'group': fn.group,
        'params': [p.to_json() for p in fn.params],
    }
