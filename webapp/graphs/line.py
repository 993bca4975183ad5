"""Line/area graphs of time series, drawn with matplotlib's object API (no pyplot)."""

from __future__ import annotations

import functools
import math
from datetime import datetime, UTC
from typing import Any, Optional

from matplotlib.dates import DateFormatter, date2num
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import (AutoMinorLocator, FixedLocator, FuncFormatter, NullFormatter,
                               NullLocator)

from webapp.graphs.axis import axis_label, linear_scale, parse_divisors, tick_values
from webapp.graphs.legend import place_legend, text_width
from webapp.graphs.options import (GraphOptions, color_list, draw_no_data, parse_color,
                                    title_height, title_size)
from webapp.graphs.time_axis import choose_row, times
from webapp.render.series import PackedSeries
from webapp.storage import packed

DEFAULT_LINE_WIDTH = 1.2


def graph_tz(options: GraphOptions) -> Any:
    """The graph's time zone (``tz``), UTC when unset or unknown."""
    name = options.str('tz')
    if name:
        try:
            from zoneinfo import ZoneInfo
            return ZoneInfo(name)
        except Exception:
            pass
    return UTC


def _consolidate(series_list: list, plot_width: int, min_x_step: float) -> None:
    """Merge points so drawn points lie at least ``min_x_step`` pixels apart (graphite's
    minXStep, default 1: never more points than the plot has pixels)."""
    drawable = max(1, int(plot_width / min_x_step)) if min_x_step > 0 else plot_width
    merging = []
    for series in series_list:
        count = _length(series)
        if drawable > 0 and count > drawable:
            series.consolidate(math.ceil(count / float(drawable)))
            merging.append(series)
        else:
            _materialize(series)
    _merge_points(merging)


def _packed_row(series: Any) -> Any:
    """The packed whisper row of a series not made into a list yet (see
    webapp.render.series.PackedSeries: a graph's bare path targets come as those), or
    None."""
    return series.packed if type(series) is PackedSeries else None


def _length(series: Any) -> int:
    row = _packed_row(series)
    return len(series) if row is None else max(0, len(row) - series.drop)


def _materialize(series: Any) -> None:
    if _packed_row(series) is not None:
        series.materialize()


@functools.lru_cache(maxsize=1024)
def _date_num(stamp: float) -> float:
    """matplotlib's date number (days since its epoch) of a Unix time (kept: a graph's
    series mostly start at the same time, and graphs at the same times)."""
    return date2num(datetime.fromtimestamp(stamp, UTC))


def _date_nums(moments: list) -> list[float]:
    """matplotlib's date numbers of datetimes, converted together (the same arithmetic
    on each element as one at a time)."""
    return [float(v) for v in date2num(moments)] if moments else []


def _points(series: Any, options: GraphOptions, tz: Any) -> tuple[Any, list]:
    """(date numbers, values) of a series; numbers, not datetimes, for speed (a numpy
    array of them when numpy is there)."""
    step = series.step * series.valuesPerPoint
    values = list(series)
    if options.bool('drawNullAsZero'):
        values = [0 if v is None else v for v in values]
    first, per_step = _date_num(series.start), step / 86400.0
    np = packed.np
    if np is None:
        return [first + i * per_step for i in range(len(values))], values
    # the same two roundings a point as first + i * per_step, for all points at once
    return first + np.arange(len(values), dtype=np.float64) * per_step, values


_FLOATS_OR_NONE = frozenset([float, type(None)])


def _merge_points(series_list: list) -> None:
    """Apply each series' valuesPerPoint now, with numpy when its values are floats/None
    and its consolidation is average/sum/min/max (what the drawing shows is the same);
    series of the same length, valuesPerPoint and function are merged as one array."""
    np = packed.np
    groups: dict[tuple[int, int, str], list[tuple[Any, Optional[list]]]] = {}
    for series in series_list:
        vpp = series.valuesPerPoint
        func = series.consolidationFunc
        if np is None or vpp <= 1 or func not in ('average', 'avg', 'sum', 'min', 'max'):
            _materialize(series)
            continue
        if _packed_row(series) is not None:     # float64 values and a mask already
            groups.setdefault((_length(series), vpp, func), []).append((series, None))
            continue
        values = list(list.__iter__(series))
        if frozenset(map(type, values)) <= _FLOATS_OR_NONE:
            groups.setdefault((len(values), vpp, func), []).append((series, values))
    for (count, vpp, func), members in groups.items():
        cells = -(-count // vpp)
        grid = np.full((len(members), cells * vpp), np.nan)
        grid[:, :count] = _value_grid(members, count)
        grid = grid.reshape(len(members), cells, vpp)
        known = (~np.isnan(grid)).sum(axis=2)
        with np.errstate(all='ignore'):
            if func in ('average', 'avg'):
                merged = np.nansum(grid, axis=2) / np.maximum(known, 1)
            elif func == 'sum':
                merged = np.nansum(grid, axis=2)
            else:
                merged = (np.nanmin if func == 'min' else np.nanmax)(
                    np.where(known[:, :, None] > 0, grid, 0.0), axis=2)
        for row, (series, _values) in enumerate(members):
            ok = (known[row] > 0) & (known[row] / float(vpp) >= (series.xFilesFactor or 0.0))
            out = merged[row].tolist()
            for index in np.flatnonzero(~ok).tolist():
                out[index] = None
            if _packed_row(series) is not None:
                series.packed, series.drop = None, 0     # its list is the merged values
            series[:] = out
            series.step = series.step * vpp
            series.valuesPerPoint = 1


def _value_grid(members: list[tuple[Any, Optional[list]]], count: int) -> Any:
    """The values of ``members`` ((series, value list or None for a packed row), each
    ``count`` long) as one float64 array, NaN where no value is (None, an empty slot)
    or the value is NaN (as the list conversion gives)."""
    np = packed.np
    if all(values is None and series.drop == 0 for series, values in members):
        stacked = packed.stack_rows([series.packed for series, _values in members])
        if stacked is not None:
            return np.where(stacked[1], stacked[0], np.nan)
    rows = []
    for series, values in members:
        if values is None:
            row, drop = series.packed, series.drop
            rows.append(np.where(row.valid[drop:], row.values[drop:], np.nan))
        else:
            rows.append(np.array(values, dtype=np.float64))        # None -> NaN
    return np.array(rows) if rows else np.empty((0, count))


def _nan(values: list) -> Any:
    """The values as floats, None as NaN (a numpy array when numpy is there)."""
    np = packed.np
    if np is not None:
        return np.array(values, dtype=np.float64)
    return [float('nan') if v is None else float(v) for v in values]


def _connect(times: list, values: list, limit: Optional[float]) -> tuple[list, list]:
    """Drop None runs of at most ``limit`` points so the line joins across them."""
    keep_t, keep_v, gap = [], [], []
    for t, v in zip(times, values, strict=True):
        if v is None:
            gap.append(t)
            continue
        if gap and limit is not None and len(gap) > limit:
            keep_t.append(gap[0])
            keep_v.append(None)
        gap = []
        keep_t.append(t)
        keep_v.append(v)
    return keep_t, keep_v


def _own_color(series: Any, options: GraphOptions) -> Any:
    """The series' colour (color()) or its axis side's (leftColor/rightColor); None."""
    side = 'right' if series.options.get('secondYAxis') else 'left'
    # set on a series only by color() and the graph's colorList
    return getattr(series, 'color', None) or options.str(side + 'Color')


def auto_colors(series_list: list, options: GraphOptions) -> dict[int, int]:
    """colorList position of each series (by id) without a colour of its own: the list is
    dealt out in request order, skipping series that have one (graphite-web's rule)."""
    positions: dict[int, int] = {}
    for series in series_list:
        if not _own_color(series, options):
            positions[id(series)] = len(positions)
    return positions


def _style(series: Any, position: int, colors: list, options: GraphOptions) -> dict:
    color = _own_color(series, options)
    side = 'right' if series.options.get('secondYAxis') else 'left'
    rgba = parse_color(color) if color else colors[position % len(colors)]
    alpha = series.options.get('alpha')
    if alpha is not None:
        rgba = (rgba[0], rgba[1], rgba[2], float(alpha))
    width = series.options.get('lineWidth', options.float(side + 'Width'))
    if width is None:
        width = _first(options, 'lineWidth', 'thickness') or DEFAULT_LINE_WIDTH
    style = {'color': rgba, 'linewidth': float(width)}
    dashed = series.options.get('dashed') or (options.bool(side + 'Dashed') and 5)
    if dashed:
        style['linestyle'] = (0, (float(dashed), float(dashed)))
    return style


def _y_formatter(options: GraphOptions, step: Optional[float], span: float) -> FuncFormatter:
    """graphite-web's tick labels for an axis of ``step`` (None: log) over ``span``."""
    system = options.str('yUnitSystem') or 'si'
    return FuncFormatter(lambda value, _pos: axis_label(value, step, span, system))


def _stack_area_mode(series_list: list, options: GraphOptions) -> None:
    mode = options.str('areaMode')
    if mode == 'stacked':
        totals: list = []
        for series in series_list:
            values = list(series)
            for i, value in enumerate(values):
                if len(totals) <= i:
                    totals.append(0)
                if value is not None:
                    totals[i] += value
                    values[i] = totals[i]
            series.step = series.step * series.valuesPerPoint
            series.consolidate(1)
            series[:] = values
            series.options['stacked'] = True
    elif mode == 'first' and series_list:
        series_list[0].options['areaFill'] = True
    elif mode == 'all':
        for series in series_list:
            series.options['areaFill'] = True


def _draw_series(ax: Any, series_list: list, options: GraphOptions, tz: Any,
                 colors: list, positions: dict[int, int], kept: Optional[dict] = None) -> list:
    """Plot each series on ``ax``; returns legend handles/labels pairs."""
    line_mode = options.str('lineMode')
    alpha_area = options.float('areaAlpha')
    drawstyle = 'steps-post' if line_mode == 'staircase' else 'default'
    handles = []
    plain: list = []
    previous_stack: Optional[list] = None
    for series in series_list:
        times, values = _points(series, options, tz)
        style = _style(series, positions.get(id(series), 0), colors, options)
        if series.options.get('drawAsInfinite'):
            xs = [t for t, v in zip(times, values, strict=True) if v]
            artist = ax.vlines(xs, 0, 1, transform=ax.get_xaxis_transform(), **{
                k: v for k, v in style.items() if k != 'linestyle'})
            handles.append((artist, series))
            continue
        if line_mode == 'connected':
            times, values = _connect(times, values, options.float('connectedLimit'))
        ys = _nan(values)
        stacked = series.options.get('stacked')
        if series.options.get('invisible'):
            previous_stack = ys if stacked else previous_stack
            continue
        fill = stacked or series.options.get('areaFill')
        if fill:
            base = previous_stack if stacked and previous_stack is not None \
                and len(previous_stack) == len(ys) else [0.0] * len(ys)
            fill_color = style['color']
            if alpha_area is not None:
                fill_color = (fill_color[0], fill_color[1], fill_color[2], alpha_area)
            ax.fill_between(times, base, ys, color=fill_color, linewidth=0,
                            step='post' if drawstyle == 'steps-post' else None)
        if stacked:
            previous_stack = ys
        if fill or drawstyle != 'default':
            (line,) = ax.plot(times, ys, drawstyle=drawstyle, **style)
            handles.append((line, series))
        else:   # plain lines are drawn together as one collection (one artist, not N)
            plain.append((times, ys, style))
            handles.append((style, series))   # a legend proxy is made only if shown
    if plain:
        _add_lines(ax, plain, kept)
    return handles


def _add_lines(ax: Any, lines: list, kept: Optional[dict] = None) -> None:
    """Plain lines as one LineCollection (NaN breaks a line, as in a plotted one)."""
    np = packed.np
    segments = [np.column_stack((np.asarray(times, dtype=float), np.asarray(ys, dtype=float)))
                for times, ys, _style in lines]
    props = {'colors': [style['color'] for _t, _y, style in lines],
             'linewidths': [style['linewidth'] for _t, _y, style in lines],
             'linestyles': [style.get('linestyle', 'solid') for _t, _y, style in lines]}

    def make() -> LineCollection:
        collection = LineCollection(segments, capstyle='projecting', joinstyle='round',
                                    **props)
        ax.add_collection(collection, autolim=True)
        ax.autoscale_view()
        return collection
    _collection(ax, kept, 'lines', make, segments, props)


def _no_units() -> bool:
    return False


def _collection(ax: Any, kept: Optional[dict], key: str, make: Any, segments: Any,
                props: dict) -> None:
    """A LineCollection of ``segments`` with ``props``: made by ``make`` (which adds it
    to ``ax``), or, on a prepared Axes (``kept``: agg.PreparedFigure.kept), the one an
    earlier graph made, given these and put last among the Axes' artists, where a new
    one would be (the same drawing order). Its view limits are the graph's own (set
    later), so the data limits a new one adds are not needed."""
    collection = None if kept is None else kept.get(key)
    if collection is None:
        collection = make()
        if kept is not None:
            kept[key] = collection
            # its x values are date numbers already: with the date axis' units set,
            # matplotlib would pass every path through the (no-op) unit conversion
            # into a new Path on each draw (~1 ms for 36 lines)
            collection.have_units = _no_units
        return
    collection.set_segments(segments)
    collection.set(**props)
    collection.set_visible(True)
    children = ax._children
    children.remove(collection)
    children.append(collection)


def reusable(series_list: list, options: GraphOptions) -> bool:
    """Whether this graph may be drawn on a prepared, reused Axes (agg.PreparedFigure):
    a graph with data on one linear y axis, both axes shown where they always are, no
    axis titles. Decided from the options alone; anything else gets a new Figure."""
    if not series_list or any(s.options.get('secondYAxis') for s in series_list):
        return False
    if options.has('logBase') or options.has('vtitle') or options.has('vtitleRight'):
        return False
    if any(options.bool(key) for key in ('hideAxes', 'graphOnly', 'hideXAxis', 'hideYAxis')):
        return False
    return options.str('yAxisSide') != 'right'


def look(options: GraphOptions) -> tuple[Any, ...]:
    """What a line graph sets once on its Axes (fonts, tick colour and size, time zone):
    a prepared Axes is kept per look."""
    return (options.str('fontName'), options.bool('fontBold'), options.bool('fontItalic'),
            options.str('fgcolor'), options.float('fontSize'), options.str('tz'))


def draw_line_graph(fig: Figure, series_list: list, options: GraphOptions,
                    ax: Any = None, styled: bool = False, kept: Optional[dict] = None) -> None:
    """Draw the series onto ``fig`` honouring graph and per-series options; onto ``ax``,
    a prepared Axes of ``fig`` (already ``styled``: tick colour and size set), if given,
    reusing the collections in ``kept`` (agg.PreparedFigure.kept) if given."""
    tz = graph_tz(options)
    fg = parse_color(options.str('fgcolor'))
    font_size = options.float('fontSize')
    graph_only = options.bool('graphOnly')
    hide_axes = options.bool('hideAxes') or graph_only
    width = options.int('width')
    height = options.int('height')
    colors = color_list(options)
    if ax is None:
        ax = fig.add_subplot(1, 1, 1)
        ax.xaxis_date(tz)
    ax.set_facecolor(parse_color(options.str('bgcolor')))
    if not series_list:
        draw_no_data(ax, fg, font_size)
        return
    left = [s for s in series_list if not s.options.get('secondYAxis')]
    right = [s for s in series_list if s.options.get('secondYAxis')]
    frame = _Frame(options, width, height, bool(right) and not hide_axes, hide_axes)
    _consolidate(series_list, max(1, int(frame.plot_width)),
                 options.float('minXStep', 1.0) or 1.0)
    _stack_area_mode(left, options)
    _stack_area_mode(right, options)
    positions = auto_colors(series_list, options)
    handles = _draw_series(ax, left, options, tz, colors, positions, kept)
    ax2 = None
    if right:
        ax2 = ax.twinx()
        handles += _draw_series(ax2, right, options, tz, colors, positions)
    _configure_axes(ax, ax2, series_list, options, tz, fg, font_size, frame, hide_axes,
                    styled, kept)
    if hide_axes:
        ax.set_axis_off()
        if ax2 is not None:
            ax2.set_axis_off()
    if options.has('title') and not graph_only:
        fig.suptitle(options.str('title'), color=fg, fontsize=title_size(font_size),
                     y=1.0 - frame.margin / float(height), va='top')
    too_many = len(handles) > options.int('legendMaxItems', 10)
    show_legend = not graph_only and not options.bool('hideLegend', too_many)
    _legend(fig, handles, options, fg, font_size, show_legend, frame)


def _configure_axes(ax: Any, ax2: Any, series_list: list, options: GraphOptions, tz: Any,
                    fg: tuple, font_size: float, frame: _Frame, hide_axes: bool,
                    styled: bool = False, kept: Optional[dict] = None) -> None:
    start = min(s.start for s in series_list)
    end = max(s.end for s in series_list)
    ax.set_xlim(_date_num(start), _date_num(end))
    for axis in (ax, ax2):
        if axis is None:
            continue
        if not styled:
            axis.tick_params(colors=fg, labelsize=font_size)
        for spine in axis.spines.values():
            spine.set_color(fg)
        log_base = _log_base(options)
        if log_base and log_base > 1:
            axis.set_yscale('log', base=log_base)
            axis.yaxis.set_minor_formatter(NullFormatter())
    left = [s for s in series_list if not s.options.get('secondYAxis')]
    right = [s for s in series_list if s.options.get('secondYAxis')]
    if ax2 is None:
        _scale_y(ax, left, options, ('yMin', 'min', 'yMinLeft'), ('yMax', 'max', 'yMaxLeft'),
                 ('yLimit', 'yLimitLeft'), ('yStep', 'yStepLeft'))
    else:
        _scale_y(ax, left, options, ('yMinLeft',), ('yMaxLeft',), ('yLimitLeft',),
                 ('yStepLeft',))
        _scale_y(ax2, right, options, ('yMinRight',), ('yMaxRight',), ('yLimitRight',),
                 ('yStepRight',))
    if ax2 is not None:
        if options.has('vtitleRight'):
            ax2.set_ylabel(options.str('vtitleRight'), color=fg, fontsize=title_size(font_size),
                           rotation=270, va='bottom')   # read top down, as graphite-web
    if options.has('vtitle'):
        ax.set_ylabel(options.str('vtitle'), color=fg, fontsize=title_size(font_size))
    if options.bool('hideYAxis'):
        ax.yaxis.set_visible(False)
    if not hide_axes:
        frame.fit_y_labels([] if options.bool('hideYAxis') else _tick_texts(ax),
                           _tick_texts(ax2) if ax2 is not None else [], options, font_size)
    row = choose_row(end - start, frame.plot_width)
    first, last = datetime.fromtimestamp(start, tz), datetime.fromtimestamp(end, tz)
    x_format = options.str('xFormat') or row.format
    ax.xaxis.set_major_locator(FixedLocator(_date_nums(
        [t for t in times(first, last, *row.label)
         if frame.label_fits(t.timestamp(), start, end, t.strftime(x_format), font_size)])))
    ax.xaxis.set_major_formatter(DateFormatter(x_format, tz=tz))
    if options.bool('hideXAxis'):
        ax.xaxis.set_visible(False)
    if not options.bool('hideGrid') and not hide_axes:
        ax.set_axisbelow(True)   # under the series, as graphite-web draws it first
        major = parse_color(options.str('majorGridLineColor'))
        # line widths are graphite-web's (px): 0.4 / 0.3 across, 0.25 / 0.33 down
        xs, colors, widths = [], [], []
        for (unit, step), color, width in ((row.minor, 'minorGridLineColor', 0.25),
                                           (row.major, 'majorGridLineColor', 0.33)):
            at = _date_nums(times(first, last, unit, step))
            xs += at
            colors += [parse_color(options.str(color))] * len(at)
            widths += [width] * len(at)
        # minor first: majors paint over them
        _collection(ax, kept, 'x grid', lambda: ax.vlines(
            xs, 0, 1, transform=ax.get_xaxis_transform(), colors=colors, linewidths=widths,
            zorder=0.6), [((x, 0.0), (x, 1.0)) for x in xs],
            {'colors': colors, 'linewidths': widths})
        minor = options.int('minorY', 1) or 0
        if ax.get_yscale() != 'linear':     # a log axis keeps matplotlib's own grid lines
            ax.grid(True, which='major', axis='y', color=major, linewidth=0.4)
        else:
            minors: list = []
            if minor > 0:
                ax.yaxis.set_minor_locator(AutoMinorLocator(minor + 1))
                minors = list(ax.yaxis.get_minorticklocs())
            ax.yaxis.set_minor_locator(NullLocator())   # the lines only: no Tick objects
            if not options.bool('hideYAxis'):
                _y_grid(ax, major, parse_color(options.str('minorGridLineColor')), minors,
                        kept)
    if options.str('yAxisSide') == 'right':
        ax.yaxis.tick_right()


def _y_grid(ax: Any, major: tuple, minor: tuple, minors: list,
            kept: Optional[dict] = None) -> None:
    """The horizontal grid as one collection: a line at each major y tick (0.4 px), then
    at each minor one (0.3 px), within the axis range, drawn as the ticks' grid lines were
    (same order, caps and clip) but without a Tick object (two lines and two texts) each."""
    low, high = sorted(ax.get_ylim())

    def inside(values: Any) -> list:   # matplotlib's _interval_contains_close, rtol 1e-10
        slack = (high - low) * 1e-10
        return [float(v) for v in values if low - slack <= v <= high + slack]
    majors, minors = inside(ax.yaxis.get_majorticklocs()), inside(minors)
    if majors or minors:
        props = {'colors': [major] * len(majors) + [minor] * len(minors),
                 'linewidths': [0.4] * len(majors) + [0.3] * len(minors)}
        _collection(ax, kept, 'y grid', lambda: ax.hlines(
            majors + minors, 0, 1, transform=ax.get_yaxis_transform(), capstyle='projecting',
            zorder=0.5, **props),   # before the axes, as their ticks
            [((0.0, y), (1.0, y)) for y in majors + minors], props)


def _log_base(options: GraphOptions) -> Optional[float]:
    """logBase as a number (graphite-web takes ``e`` for the natural log)."""
    return math.e if options.str('logBase') == 'e' else options.float('logBase')


def _tick_texts(axis: Any) -> list[str]:
    """The y tick labels ``axis`` will draw."""
    low, high = axis.get_ylim()
    formatter = axis.yaxis.get_major_formatter()
    return [formatter(value, i) for i, value in enumerate(axis.yaxis.get_majorticklocs())
            if min(low, high) <= value <= max(low, high)]


def _first(options: GraphOptions, *keys: str) -> Optional[float]:
    for key in keys:
        if options.has(key):
            return options.float(key)
    return None


class _Frame:
    """Pixel room around the plot: ``margin`` (graphite's, default 10) on every side, plus
    room for tick labels, a right axis, the title and the legend."""

    def __init__(self, options: GraphOptions, width: int, height: int, right_axis: bool,
                 hide_axes: bool) -> None:
        margin = options.int('margin', 10)
        if margin is None or margin < 0:
            margin = 10
        if options.bool('graphOnly'):
            margin = 0
        self.margin, self.width, self.height = margin, width, height
        labels = 0 if hide_axes else 1
        self.left = margin + 43 * labels
        self.right = margin + (36 if right_axis else 14) * labels
        self.top = margin + 7 * labels
        if options.has('title') and not options.bool('graphOnly'):
            self.top += title_height(options.float('fontSize'))
        self.bottom = margin + 20 * labels

    def fit_y_labels(self, left: list[str], right: list[str], options: GraphOptions,
                     font_size: float) -> None:
        """Room beside the plot for the widest y tick label of each side (and vtitle)."""
        if options.str('yAxisSide') == 'right' and not right:
            left, right = [], left
        title_room = title_size(font_size) * 1.4 + 2
        widths = [max((text_width(t, font_size) for t in labels), default=0.0)
                  for labels in (left, right)]
        self.left = self.margin + (widths[0] + 8 if left else 4)
        if options.has('vtitle'):
            self.left += title_room
        self.right = self.margin + (widths[1] + 8 if right else 14)
        if right and options.has('vtitleRight'):
            self.right += title_room

    @property
    def plot_width(self) -> float:
        return self.width - self.left - self.right

    def label_fits(self, at: float, start: float, end: float, text: str,
                   font_size: float) -> bool:
        """Whether an x label centred at time ``at`` stays inside the margins."""
        x = self.left + (at - start) / float(max(end - start, 1)) * self.plot_width
        half = text_width(text, font_size) / 2.0
        return self.margin <= x - half and x + half <= self.width - self.margin

    def apply(self, fig: Figure, legend_px: float = 0.0) -> None:
        width, height = float(self.width), float(self.height)
        left = min(self.left / width, 0.45)
        right = max(1.0 - self.right / width, left + 0.05)
        bottom = min((self.bottom + legend_px) / height, 0.6)
        top = max(1.0 - self.top / height, bottom + 0.05)
        fig.subplots_adjust(left=left, right=right, top=top, bottom=bottom)


def _legend(fig: Figure, handles: list, options: GraphOptions, fg: tuple, font_size: float,
            show: bool, frame: _Frame) -> None:
    if not show or not handles:
        frame.apply(fig)
        return
    seen, artists, labels = set(), [], []
    for artist, series in handles:
        name = str(series.name)
        if options.bool('uniqueLegend') and name in seen:
            continue
        if options.bool('hideNullFromLegend') and all(v is None for v in series):
            continue
        seen.add(name)
        artists.append(Line2D([], [], **artist) if isinstance(artist, dict) else artist)
        labels.append(name)
    frame.apply(fig, place_legend(fig, artists, labels, font_size, fg, frame.width,
                                  frame.height, frame.margin))


def _data_limits(series_list: list, options: GraphOptions) -> tuple[float, float]:
    """(lowest, highest) drawn value, as graphite's dataLimits (0..1 with no data)."""
    finite = [s for s in series_list if not s.options.get('drawAsInfinite')]
    values = [v for s in finite for v in s if v is not None and v == v]
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    if options.bool('drawNullAsZero') and any(None in list(s) for s in finite):
        low, high = min(low, 0.0), max(high, 0.0)
    return float(low), float(high)


def _axis_value(options: GraphOptions, keys: tuple[str, ...]) -> Any:
    for key in keys:
        if options.has(key):
            if options.str(key) == 'max':
                return 'max'
            return options.float(key)
    return None


def _scale_log_y(axis: Any, series_list: list, options: GraphOptions, axis_min: Any,
                 axis_max: Any) -> None:
    """A log axis from the power of the base at or below the lowest positive value to the
    one at or above the highest, a tick at each power (graphite-web's log axis); yMin and
    yMax replace either end."""
    base = _log_base(options) or 10.0
    values = [v for s in series_list if not s.options.get('drawAsInfinite')
              for v in s if v is not None and v == v and v > 0 and not math.isinf(v)]
    if values:
        bottom = base ** math.floor(math.log(min(values), base))
        top = base ** math.ceil(math.log(max(values), base))
        if top <= bottom:
            top = bottom * base
    else:
        bottom, top = 1.0, base
    if axis_min is not None and axis_min > 0:
        bottom = axis_min
    if axis_max is not None and axis_max != 'max' and axis_max > bottom:
        top = axis_max
    axis.set_ylim(bottom, top)
    axis.yaxis.set_major_formatter(_y_formatter(options, None, top - bottom))
    ticks, value = [], base ** math.ceil(math.log(bottom, base) - 1e-7)
    while value <= top * (1 + 1e-7) and len(ticks) < 1000:
        ticks.append(value)
        value *= base
    axis.yaxis.set_major_locator(FixedLocator(ticks))


def _scale_y(axis: Any, series_list: list, options: GraphOptions, min_keys: tuple,
             max_keys: tuple, limit_keys: tuple, step_keys: tuple) -> None:
    """Range and ticks of one y axis from yMin/yMax/yLimit/yStep/yDivisors."""
    axis_min, axis_max = _axis_value(options, min_keys), _axis_value(options, max_keys)
    if axis.get_yscale() != 'linear':
        _scale_log_y(axis, series_list, options, axis_min, axis_max)
        return
    low, high = _data_limits(series_list, options)
    scale = linear_scale(low, high, axis_min=axis_min, axis_max=axis_max,
                         axis_limit=_axis_value(options, limit_keys),
                         step=_axis_value(options, step_keys),
                         divisors=parse_divisors(options.raw('yDivisors', '4,5,6')),
                         binary=options.str('yUnitSystem') == 'binary')
    axis.set_ylim(scale.bottom, scale.top)
    axis.yaxis.set_major_formatter(_y_formatter(options, scale.step, scale.top - scale.bottom))
    axis.yaxis.set_major_locator(FixedLocator(tick_values(scale)))
