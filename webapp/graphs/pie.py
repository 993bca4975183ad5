"""Pie charts: one slice per series, sized by the pieMode reduction of its values."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from webapp.graphs.legend import place_legend
from webapp.graphs.options import (GraphOptions, color_list, draw_no_data, parse_color,
                                    title_height, title_size)
from webapp import pysum


def slice_values(series_list: list, options: GraphOptions) -> list[tuple[str, float]]:
    """(label, value) per series using pieMode (average, maximum or minimum)."""
    from webapp.plugins import PIE_FUNCTIONS
    mode = options.str('pieMode') or 'average'
    func = PIE_FUNCTIONS.get(mode).func
    slices = []
    for series in series_list:
        value = func({}, series)
        if value is not None and value > 0:
            slices.append((str(series.name), float(value)))
    return slices


def _label_text(mode: str, minimum: float, value: float, percent: float) -> str:
    """A slice's value label as graphite-web writes it ('' when under valueLabelsMin:
    the percent in percent mode, the value in number mode)."""
    if mode == 'number':
        if value < minimum:
            return ''
        return '%.2f' % value if value < 10 and value != int(value) else '%d' % int(value)
    if mode == 'none' or percent < minimum:
        return ''
    return '%d%%' % round(percent)


def draw_pie_graph(fig: Figure, series_list: list, options: GraphOptions) -> None:
    """Draw a pie chart of the series onto ``fig``: the pie fills the room the margin,
    title and legend leave (95 % of it, as graphite-web draws it)."""
    fg = parse_color(options.str('fgcolor'))
    font_size = options.float('fontSize')
    width, height = float(options.int('width')), float(options.int('height'))
    margin = max(0, options.int('margin', 10) or 0)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_facecolor(parse_color(options.str('bgcolor')))
    slices = slice_values(series_list, options)
    top = margin
    if options.has('title'):
        fig.suptitle(options.str('title'), color=fg, fontsize=title_size(font_size),
                     y=1.0 - margin / height, va='top')
        top += title_height(font_size)
    if not slices:
        draw_no_data(ax, fg, font_size)
        return
    colors = color_list(options)
    slice_colors = []
    by_name = {str(s.name): s for s in series_list}
    for i, (label, _) in enumerate(slices):
        # a series (or None) whose color() was set
        own = getattr(by_name.get(label), 'color', None)
        slice_colors.append(parse_color(own) if own else colors[i % len(colors)])
    total = pysum.total(v for _, v in slices)
    mode = options.str('valueLabels') or 'percent'
    minimum = options.float('valueLabelsMin')

    def label_for(percent: float) -> str:
        return _label_text(mode, minimum, percent * total / 100.0, percent)

    rotate = options.str('pieLabels') == 'rotated'
    wedges: Any = ax.pie([v for _, v in slices], colors=slice_colors, autopct=label_for,
                         startangle=90, counterclock=False, rotatelabels=rotate,
                         textprops={'color': parse_color(options.str('valueLabelsColor'))
                                    if options.has('valueLabelsColor') else fg,
                                    'fontsize': font_size})
    ax.set_aspect('equal')
    ax.set_xlim(-1 / 0.95, 1 / 0.95)
    ax.set_ylim(-1 / 0.95, 1 / 0.95)
    bottom = margin
    if not options.bool('hideLegend'):
        bottom += place_legend(fig, wedges[0], [label for label, _ in slices], font_size, fg,
                               width, height, margin)
    room_w, room_h = max(1.0, width - 2 * margin), max(1.0, height - top - bottom)
    ax.set_position((margin / width, bottom / height, room_w / width, room_h / height))
