"""Y-axis range and tick step chosen the way graphite-web 1.1.10's line graph chooses them.

Honours yMin/yMax/yLimit/yStep/yDivisors (and their Left/Right forms): without a step, the
step is the round number (1, 2 or 5 times a power of ten, or a power of two for the binary
unit system) and divisor count from ``divisors`` that leaves the least blank space
("slop") beyond the data; the axis then runs from the step multiple at or below the data
to the one at or above it, never above yLimit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from webapp.graphs.units import UNIT_SYSTEMS, format_units

EPSILON = 1e-7
DEFAULT_DIVISORS = (4, 5, 6)
MAX_TICKS = 1000
MIN_SPAN = 1e-200


class AxisError(ValueError):
    """Axis settings that cannot be drawn (e.g. a minimum above the maximum)."""


@dataclass
class AxisScale:
    bottom: float
    top: float
    step: float


def _finite(value: float, what: str) -> float:
    if math.isnan(value) or math.isinf(value):
        raise AxisError('Encountered %s %s' % ('NaN' if math.isnan(value) else 'infinite',
                                               what))
    return value


def _delta(x: float) -> float:
    return 1.0 if abs(x) < 1e-9 else 0.1 * abs(x)


def _steps(min_step: float, binary: bool) -> Iterator[float]:
    base, mantissas = (2.0, (1.0,)) if binary else (10.0, (1.0, 2.0, 5.0))
    exponent = math.floor(math.log(min_step, base) - EPSILON)
    while True:
        for mantissa in mantissas:
            value = mantissa * base ** exponent
            if value >= min_step * (1.0 - EPSILON):
                yield value
        exponent += 1


def _slop(low: float, high: float, step: float, divisor: int) -> Optional[float]:
    bottom = step * math.floor(low / step + EPSILON)
    top = bottom + step * divisor
    if top >= high - EPSILON * step:
        return max(top - high, low - bottom)
    return None


def choose_step(low: float, high: float, divisors: tuple[int, ...] = DEFAULT_DIVISORS,
                binary: bool = False) -> float:
    """The round step (with a divisor count from ``divisors``) leaving the least slop."""
    if any(d < 1 for d in divisors):
        raise AxisError('Divisors must be greater than or equal to one')
    variance = high - low
    best_slop: Optional[float] = None
    best_step = 1.0
    for step in _steps(variance / float(max(divisors)), binary):
        if best_slop is not None and step * min(divisors) >= 2 * best_slop + variance:
            break
        for divisor in divisors:
            slop = _slop(low, high, step, divisor)
            if slop is not None and (best_slop is None or slop < best_slop):
                best_slop, best_step = slop, step
    return best_step


def linear_scale(low: float, high: float, axis_min: Any = None, axis_max: Any = None,
                 axis_limit: Any = None, step: Any = None,
                 divisors: tuple[int, ...] = DEFAULT_DIVISORS,
                 binary: bool = False) -> AxisScale:
    """Bottom, top and tick step of a linear axis over data from ``low`` to ``high``."""
    low, high = _finite(low, 'data value'), _finite(high, 'data value')
    min_from, max_from = 'data', 'data'
    if axis_min is not None and not math.isnan(axis_min):
        low, min_from = _finite(float(axis_min), 'axis min'), 'min'
    if axis_max == 'max':
        max_from = 'extremum'
    elif axis_max is not None and not math.isnan(axis_max):
        high, max_from = _finite(float(axis_max), 'axis max'), 'max'
    limit: Optional[float] = None
    if axis_limit is not None and not math.isnan(axis_limit):
        if axis_limit < high:
            high, max_from = _finite(float(axis_limit), 'axis limit'), 'limit'
        elif not math.isinf(axis_limit):
            limit = float(axis_limit)
    if low >= high:
        min_fixed, max_fixed = min_from == 'min', max_from in ('max', 'limit')
        if min_fixed and max_fixed:
            raise AxisError('The %s must be less than the %s' % (min_from, max_from))
        if min_fixed:
            high = low + _delta(low)
        elif max_fixed:
            low = high - _delta(high)
        else:
            delta, middle = _delta(max(abs(low), abs(high))), (low + high) / 2.0
            low, high = middle - delta, middle + delta
    if step is not None:
        chosen = _finite(float(step), 'axis step')
        if chosen <= 0:
            raise AxisError('The step size must be positive')
    else:
        chosen = choose_step(low, high, divisors, binary)
    bottom = chosen * math.floor(low / chosen + EPSILON) if min_from == 'data' else low
    if max_from == 'data':
        top = chosen * math.ceil(high / chosen - EPSILON)
        if limit is not None and top > limit + EPSILON * chosen:
            top = limit
    else:
        top = high
    if top == bottom:
        top += 1
    if top - bottom < MIN_SPAN:  # matplotlib cannot place ticks over such a range
        raise AxisError('The y axis from %g to %g is too narrow to draw' % (bottom, top))
    if top - bottom > MAX_TICKS * chosen:   # an absurd step: pick a sane one instead
        chosen = choose_step(bottom, top, divisors, binary)
    return AxisScale(bottom, top, chosen)


def tick_values(scale: AxisScale) -> list[float]:
    """The labelled values: multiples of the step from bottom to top."""
    start = scale.step * math.ceil(scale.bottom / scale.step - EPSILON)
    values, i = [], 0
    while True:
        value = start + i * scale.step
        if value > scale.top + EPSILON * scale.step:
            return values
        values.append(value)
        i += 1


def parse_divisors(text: Any) -> tuple[int, ...]:
    """``yDivisors`` ('4,5,6') as integers; AxisError when not."""
    try:
        values = tuple(int(part) for part in str(text).split(',') if part.strip())
    except ValueError:
        raise AxisError('yDivisors must be comma-separated integers, got %r' % text) from None
    return values or DEFAULT_DIVISORS


def axis_label(value: float, step: Optional[float], span: float, system: str = 'si') -> str:
    """A y tick label as graphite-web 1.1.10 writes it: a unit prefix only when the step
    reaches it, then ``%g`` below 0.1, two decimals below 1, one decimal when the span is
    over 10 or a prefix is shown, else as many decimals as the span needs."""
    system = system if system in UNIT_SYSTEMS else 'si'
    scaled, prefix = format_units(value, step, system=system)
    span_scaled, span_prefix = format_units(span, step, system=system)
    suffix = ' ' + prefix if prefix else ''
    if scaled < 0.1:
        text = '%g' % scaled
    elif scaled < 1.0:
        text = '%.2f' % scaled
    elif span_scaled > 10 or prefix or span_prefix:
        text = '%.1f' % scaled
    elif span_scaled > 3:
        text = '%.1f' % scaled
    elif span_scaled > 0.1:
        text = '%.2f' % scaled
    else:
        text = '%g' % scaled
    return text + suffix
