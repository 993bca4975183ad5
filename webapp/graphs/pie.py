"""Pie charts: one slice per series, sized by the pieMode reduction of its values."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from webapp.graphs.options import GraphOptions, color_list, parse_color


def slice_values(series_list: list, options: GraphOptions) -> list[tuple[str, float]]:
    """(label, value) per series using pieMode (average, maximum or minimum)."""
    from webapp.functions.registry import PIE_FUNCTIONS
    mode = options.str('pieMode') or 'average'
    func = PIE_FUNCTIONS.get(mode).func
    slices = []
    for series in series_list:
        value = func({}, series)
        if value is not None and value > 0:
            slices.append((str(series.name), float(value)))
    return slices


def draw_pie_graph(fig: Figure, series_list: list, options: GraphOptions) -> None:
    """Draw a pie chart of the series onto ``fig``."""
    fg = parse_color(options.str('fgcolor'))
    font_size = options.float('fontSize')
    ax = fig.add_subplot(1, 1, 1)
    ax.set_facecolor(parse_color(options.str('bgcolor')))
    slices = slice_values(series_list, options)
    if options.has('title'):
        fig.suptitle(options.str('title'), color=fg, fontsize=font_size * 1.2)
    if not slices:
        ax.set_axis_off()
        ax.text(0.5, 0.5, 'No Data', ha='center', va='center', color=fg,
                fontsize=font_size * 1.5, transform=ax.transAxes)
        return
    colors = color_list(options)
    slice_colors = []
    by_name = {str(s.name): s for s in series_list}
    for i, (label, _) in enumerate(slices):
        own = getattr(by_name.get(label), 'color', None)
        slice_colors.append(parse_color(own) if own else colors[i % len(colors)])
    total = sum(v for _, v in slices)
    mode = options.str('valueLabels') or 'percent'
    minimum = options.float('valueLabelsMin')

    def label_for(percent: float) -> str:
        value = percent * total / 100.0
        if mode == 'none' or value < minimum:
            return ''
        if mode == 'number':
            return '%g' % round(value, 2)
        return '%d%%' % round(percent)

    rotate = options.str('pieLabels') == 'rotated'
    wedges: Any = ax.pie([v for _, v in slices], colors=slice_colors, autopct=label_for,
                         startangle=90, counterclock=False, rotatelabels=rotate,
                         textprops={'color': parse_color(options.str('valueLabelsColor'))
                                    if options.has('valueLabelsColor') else fg,
                                    'fontsize': font_size})
    ax.set_aspect('equal')
    if not options.bool('hideLegend'):
        fig.legend(wedges[0], [label for label, _ in slices], loc='lower center',
                   ncol=max(1, min(len(slices), options.int('width') // 160)),
                   frameon=False, fontsize=font_size, labelcolor=fg)
        fig.subplots_adjust(bottom=0.2)
