"""Line/area graphs of time series, drawn with matplotlib's object API (no pyplot)."""

from __future__ import annotations

import math
from datetime import datetime, UTC
from typing import Any, Optional

from matplotlib.dates import AutoDateLocator, DateFormatter
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from webapp.functions.common import format_units
from webapp.graphs.options import GraphOptions, color_list, parse_color

DEFAULT_LINE_WIDTH = 1.2


def _tz(options: GraphOptions) -> Any:
    name = options.str('tz')
    if name:
        try:
            from zoneinfo import ZoneInfo
            return ZoneInfo(name)
        except Exception:
            pass
    return UTC


def _consolidate(series_list: list, plot_width: int) -> None:
    """Merge points so a series never has more points than the plot has pixels."""
    for series in series_list:
        count = len(series)
        if plot_width > 0 and count > plot_width:
            series.consolidate(math.ceil(count / float(plot_width)))


def _points(series: Any, options: GraphOptions, tz: Any) -> tuple[list, list]:
    step = series.step * series.valuesPerPoint
    values = list(series)
    if options.bool('drawNullAsZero'):
        values = [0 if v is None else v for v in values]
    times = [datetime.fromtimestamp(series.start + i * step, tz) for i in range(len(values))]
    return times, values


def _nan(values: list) -> list:
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


def _style(series: Any, index: int, colors: list, options: GraphOptions) -> dict:
    side = 'right' if series.options.get('secondYAxis') else 'left'
    color = getattr(series, 'color', None) or options.str(side + 'Color')
    rgba = parse_color(color) if color else colors[index % len(colors)]
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


def _y_formatter(options: GraphOptions) -> FuncFormatter:
    system = options.str('yUnitSystem') or 'si'

    def fmt(value: float, _pos: Any) -> str:
        if system == 'none':
            return '%g' % value
        scaled, prefix = format_units(value, system=system if system != 'none' else 'si')
        text = ('%.2f' % scaled).rstrip('0').rstrip('.') if scaled is not None else ''
        return '%s%s' % (text, prefix)
    return FuncFormatter(fmt)


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
                 colors: list, index_offset: int = 0) -> list:
    """Plot each series on ``ax``; returns legend handles/labels pairs."""
    line_mode = options.str('lineMode')
    alpha_area = options.float('areaAlpha')
    drawstyle = 'steps-post' if line_mode == 'staircase' else 'default'
    handles = []
    previous_stack: Optional[list] = None
    for offset, series in enumerate(series_list):
        index = index_offset + offset
        times, values = _points(series, options, tz)
        style = _style(series, index, colors, options)
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
        (line,) = ax.plot(times, ys, drawstyle=drawstyle, **style)
        handles.append((line, series))
    return handles


def draw_line_graph(fig: Figure, series_list: list, options: GraphOptions) -> None:
    """Draw the series onto ``fig`` honouring graph and per-series options."""
    tz = _tz(options)
    fg = parse_color(options.str('fgcolor'))
    font_size = options.float('fontSize')
    graph_only = options.bool('graphOnly')
    hide_axes = options.bool('hideAxes') or graph_only
    width = options.int('width')
    height = options.int('height')
    colors = color_list(options)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_facecolor(parse_color(options.str('bgcolor')))
    if not series_list:
        ax.set_axis_off()
        ax.text(0.5, 0.5, 'No Data', ha='center', va='center', color=fg,
                fontsize=font_size * 1.5, transform=ax.transAxes)
        return
    _consolidate(series_list, max(1, width - 60))
    left = [s for s in series_list if not s.options.get('secondYAxis')]
    right = [s for s in series_list if s.options.get('secondYAxis')]
    _stack_area_mode(left, options)
    _stack_area_mode(right, options)
    handles = _draw_series(ax, left, options, tz, colors)
    ax2 = None
    if right:
        ax2 = ax.twinx()
        handles += _draw_series(ax2, right, options, tz, colors, len(left))
    _configure_axes(ax, ax2, series_list, options, tz, fg, font_size)
    if hide_axes:
        ax.set_axis_off()
        if ax2 is not None:
            ax2.set_axis_off()
    if options.has('title') and not graph_only:
        fig.suptitle(options.str('title'), color=fg, fontsize=font_size * 1.2)
    too_many = len(handles) > options.int('legendMaxItems', 10)
    show_legend = not graph_only and not options.bool('hideLegend', too_many)
    right_margin = 0.86 if ax2 is not None and not hide_axes else 0.95
    _legend(fig, handles, options, fg, font_size, show_legend, width, height, right_margin)


def _configure_axes(ax: Any, ax2: Any, series_list: list, options: GraphOptions, tz: Any,
                    fg: tuple, font_size: float) -> None:
    start = min(s.start for s in series_list)
    end = max(s.end for s in series_list)
    ax.set_xlim(datetime.fromtimestamp(start, tz), datetime.fromtimestamp(end, tz))
    locator = AutoDateLocator(tz=tz, minticks=3, maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(DateFormatter(options.str('xFormat') or _x_format(end - start),
                                               tz=tz))
    for axis in (ax, ax2):
        if axis is None:
            continue
        axis.tick_params(colors=fg, labelsize=font_size)
        for spine in axis.spines.values():
            spine.set_color(fg)
        axis.yaxis.set_major_formatter(_y_formatter(options))
        log_base = options.float('logBase')
        if log_base and log_base > 1:
            axis.set_yscale('log', base=log_base)
    low = _first(options, 'yMin', 'min', 'yMinLeft')
    high = _first(options, 'yMax', 'max', 'yMaxLeft')
    if low is not None or high is not None:
        ax.set_ylim(bottom=low, top=high)
    if ax2 is not None:
        low2, high2 = options.float('yMinRight'), options.float('yMaxRight')
        if low2 is not None or high2 is not None:
            ax2.set_ylim(bottom=low2, top=high2)
        if options.has('vtitleRight'):
            ax2.set_ylabel(options.str('vtitleRight'), color=fg, fontsize=font_size)
    if options.has('vtitle'):
        ax.set_ylabel(options.str('vtitle'), color=fg, fontsize=font_size)
    if options.bool('hideYAxis'):
        ax.yaxis.set_visible(False)
    if options.bool('hideXAxis'):
        ax.xaxis.set_visible(False)
    if not options.bool('hideGrid'):
        ax.grid(True, which='major', color=parse_color(options.str('majorGridLineColor')),
                linewidth=0.6)
        if options.bool('minorY', True):
            ax.minorticks_on()
            ax.grid(True, which='minor', axis='y',
                    color=parse_color(options.str('minorGridLineColor')), linewidth=0.3)
            ax.tick_params(which='minor', left=False, bottom=False)
    if options.str('yAxisSide') == 'right':
        ax.yaxis.tick_right()


def _first(options: GraphOptions, *keys: str) -> Optional[float]:
    for key in keys:
        if options.has(key):
            return options.float(key)
    return None


def _x_format(span: float) -> str:
    if span <= 2 * 86400:
        return '%H:%M'
    if span <= 7 * 86400:
        return '%a %H:%M'
    return '%m/%d'


def _legend(fig: Figure, handles: list, options: GraphOptions, fg: tuple, font_size: float,
            show: bool, width: int, height: int, right: float) -> None:
    top = 0.88 if options.has('title') else 0.95
    if not show or not handles:
        fig.subplots_adjust(left=0.16, right=right, top=top, bottom=0.12)
        return
    seen, artists, labels = set(), [], []
    for artist, series in handles:
        name = str(series.name)
        if options.bool('uniqueLegend') and name in seen:
            continue
        if options.bool('hideNullFromLegend') and all(v is None for v in series):
            continue
        seen.add(name)
        artists.append(artist)
        labels.append(name)
    columns = max(1, min(len(labels), int(width // 160)))
    rows = math.ceil(len(labels) / columns) if labels else 0
    legend_px = rows * font_size * 1.5 + 8
    bottom = min(0.6, (legend_px + 24) / float(height))
    fig.subplots_adjust(left=0.16, right=right, top=top, bottom=bottom)
    if labels:
        fig.legend(artists, labels, loc='lower center', ncol=columns, frameon=False,
                   fontsize=font_size, labelcolor=fg, borderaxespad=0.2)
