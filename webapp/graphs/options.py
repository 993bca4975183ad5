"""Parsing of render graph options (query-string values) and graphite colour names."""

from __future__ import annotations

import math
from typing import Any, Optional

COLOR_ALIASES: dict[str, tuple[int, int, int]] = {
    'black': (0, 0, 0), 'white': (255, 255, 255), 'blue': (100, 100, 255),
    'green': (0, 200, 0), 'red': (200, 0, 50), 'yellow': (255, 255, 0),
    'orange': (255, 165, 0), 'purple': (200, 100, 255), 'brown': (150, 100, 50),
    'cyan': (0, 255, 255), 'aqua': (0, 150, 150), 'gray': (175, 175, 175),
    'grey': (175, 175, 175), 'magenta': (255, 0, 255), 'pink': (255, 100, 100),
    'gold': (200, 200, 0), 'rose': (200, 150, 200), 'darkblue': (0, 0, 255),
    'darkgreen': (0, 255, 0), 'darkred': (255, 0, 0), 'darkgray': (111, 111, 111),
    'darkgrey': (111, 111, 111),
}

DEFAULTS: dict[str, Any] = {
    'width': 330, 'height': 250, 'bgcolor': 'white', 'fgcolor': 'black',
    'majorGridLineColor': 'rose', 'minorGridLineColor': 'grey',
    'colorList': 'blue,green,red,purple,brown,yellow,aqua,grey,magenta,pink,gold,rose',
    'fontName': 'sans-serif', 'fontSize': 10, 'margin': 10,
    'areaMode': 'none', 'lineMode': 'slope', 'pieMode': 'average', 'yUnitSystem': 'si',
    'valueLabels': 'percent', 'valueLabelsMin': 5,
}


# Numeric graph options and the values they may take (inclusive bounds): anything else is
# refused before drawing with an error naming the parameter (HTTP 400). graphite-web 1.1.10
# answers 500 for a non-number and draws (or fails on) absurd values; ours are bounded so
# one request cannot ask for gigabytes of pixels or a long loop: width and height at most
# MAX_SIDE pixels each and MAX_PIXELS together.
MAX_SIDE = 8192
MAX_PIXELS = 4096 * 4096
_Y_VALUE = (-1e300, 1e300)
NUMERIC_OPTIONS: dict[str, tuple[float, float]] = {
    'width': (1, MAX_SIDE), 'height': (1, MAX_SIDE), 'margin': (0, MAX_SIDE),
    'fontSize': (1, 500), 'lineWidth': (0, 100), 'thickness': (0, 100),
    'leftWidth': (0, 100), 'rightWidth': (0, 100), 'minXStep': (0, MAX_SIDE),
    'areaAlpha': (0, 1), 'connectedLimit': (0, 1e12), 'minorY': (0, 100),
    'legendMaxItems': (-1e12, 1e12), 'valueLabelsMin': (-1e300, 1e300),
    'logBase': (-1e300, 1e6),
    'min': _Y_VALUE, 'max': _Y_VALUE, 'yMin': _Y_VALUE, 'yMax': _Y_VALUE,
    'yMinLeft': _Y_VALUE, 'yMinRight': _Y_VALUE, 'yMaxLeft': _Y_VALUE, 'yMaxRight': _Y_VALUE,
    'yLimit': _Y_VALUE, 'yLimitLeft': _Y_VALUE, 'yLimitRight': _Y_VALUE,
    'yStep': (1e-300, 1e300), 'yStepLeft': (1e-300, 1e300), 'yStepRight': (1e-300, 1e300),
}
# Words some numeric options also take (graphite-web's): yMax=max, logBase=e.
NUMERIC_WORDS = {'max': ('max',), 'yMax': ('max',), 'yMaxLeft': ('max',),
                 'yMaxRight': ('max',), 'logBase': ('e',)}
MAX_DIVISOR = 100


class OptionError(ValueError):
    """A graph option that cannot be drawn; the message names it (HTTP 400)."""


def check_options(params: dict) -> None:
    """OptionError naming the first graph option in ``params`` (query-string values, or
    values coerced by the render view) that cannot be drawn: not a number, not finite, or
    outside its bounds; also yDivisors (comma-separated integers 1..MAX_DIVISOR)."""
    for key, (low, high) in NUMERIC_OPTIONS.items():
        value = _single(params.get(key))
        if value is None or value == '' or isinstance(value, bool):
            if isinstance(value, bool):
                raise OptionError('%s must be a number, got %r' % (key, value))
            continue
        if str(value) in NUMERIC_WORDS.get(key, ()):
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise OptionError('%s must be a number, got %r' % (key, value)) from None
        if not math.isfinite(number) or not low <= number <= high:
            raise OptionError('%s must be a finite number from %g to %g, got %r'
                             % (key, low, high, value))
    width, height = (float(_single(params.get(k)) or DEFAULTS[k]) for k in ('width', 'height'))
    if width * height > MAX_PIXELS:
        raise OptionError('width x height must be at most %d pixels, got %r x %r'
                         % (MAX_PIXELS, _single(params.get('width')),
                            _single(params.get('height'))))
    divisors = _single(params.get('yDivisors'))
    if divisors not in (None, ''):
        try:
            values = [int(part) for part in str(divisors).split(',') if part.strip()]
        except ValueError:
            values = [0]
        if not values or not all(1 <= v <= MAX_DIVISOR for v in values):
            raise OptionError('yDivisors must be comma-separated integers from 1 to %d, got %r'
                             % (MAX_DIVISOR, divisors))


def _single(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return value[-1] if value else None
    return value


class GraphOptions:
    """Typed access to a params dict whose values are usually query-string strings."""

    def __init__(self, params: Optional[dict] = None) -> None:
        self.params = {k: _single(v) for k, v in (params or {}).items()}

    def raw(self, key: str, default: Any = None) -> Any:
        value = self.params.get(key)
        if value is None or value == '':
            return DEFAULTS.get(key, default) if default is None else default
        return value

    def str(self, key: str, default: Any = None) -> Any:
        value = self.raw(key, default)
        return None if value is None else str(value)

    def float(self, key: str, default: Optional[float] = None) -> Optional[float]:
        value = self.raw(key, default)
        if value is None:
            return None
        try:
            return float(value)
        except (TypeError, ValueError):
            return default

    def int(self, key: str, default: Optional[int] = None) -> Optional[int]:
        value = self.float(key, default)
        return None if value is None else int(value)

    def bool(self, key: str, default: bool = False) -> bool:
        value = self.params.get(key)
        if value is None or value == '':
            return default
        if isinstance(value, bool):
            return value
        return str(value).strip().lower() in ('1', 'true', 'yes', 'on')

    def has(self, key: str) -> bool:
        return self.params.get(key) not in (None, '')


def parse_color(text: Any) -> tuple[float, float, float, float]:
    """RGBA (0..1) for a graphite colour: alias, 'RRGGBB[AA]' hex (with or without '#')."""
    value = str(text).strip()
    lowered = value.lower()
    if lowered in COLOR_ALIASES:
        r, g, b = COLOR_ALIASES[lowered]
        return (r / 255.0, g / 255.0, b / 255.0, 1.0)
    hexed = lowered.replace('%23', '').lstrip('#')
    if len(hexed) in (6, 8) and all(c in '0123456789abcdef' for c in hexed):
        parts = [int(hexed[i:i + 2], 16) / 255.0 for i in range(0, len(hexed), 2)]
        if len(parts) == 3:
            parts.append(1.0)
        return tuple(parts)  # type: ignore[return-value]
    from matplotlib.colors import to_rgba
    try:
        return to_rgba(lowered)
    except ValueError:
        return (0.0, 0.0, 0.0, 1.0)


def color_list(options: GraphOptions) -> list[tuple[float, float, float, float]]:
    """The cycle of line colours from ``colorList``."""
    names = [c for c in str(options.raw('colorList')).split(',') if c.strip()]
    return [parse_color(c) for c in names] or [parse_color('blue')]


def title_size(font_size: float) -> float:
    """graphite-web's title (and vtitle) size: the font size plus its natural log, floored."""
    return font_size + math.floor(math.log(font_size)) if font_size > 1 else font_size


def title_height(font_size: float) -> float:
    """Pixels the title takes above the plot: one and a half title lines and a 4 px gap."""
    return title_size(font_size) * 1.5 + 4


def draw_no_data(ax: Any, fg: Any, font_size: float) -> None:
    """An empty graph: the axes hidden and 'No Data' in their middle, in ``fg``."""
    ax.set_axis_off()
    ax.text(0.5, 0.5, 'No Data', ha='center', va='center', color=fg,
            fontsize=font_size * 1.5, transform=ax.transAxes)
