"""PNG / SVG / PDF rendering of series lists through matplotlib (Agg, no pyplot state)."""

from __future__ import annotations

import contextlib
import io
import threading
from typing import Any, Iterator

from webapp.graphs.options import GraphOptions, parse_color

CONTENT_TYPES = {'png': 'image/png', 'svg': 'image/svg+xml', 'pdf': 'application/pdf'}
DPI = 72.0


def _canvas(fig: Any, fmt: str) -> Any:
    if fmt == 'svg':
        from matplotlib.backends.backend_svg import FigureCanvasSVG
        return FigureCanvasSVG(fig)
    if fmt == 'pdf':
        from matplotlib.backends.backend_pdf import FigureCanvasPdf
        return FigureCanvasPdf(fig)
    from webapp.graphs.agg import ReusingCanvas
    return ReusingCanvas(fig)


@contextlib.contextmanager
def _rc(settings: dict[str, Any]) -> Iterator[None]:
    """matplotlib's rcParams ``settings`` while drawing, put back after: what
    ``matplotlib.rc_context`` does for these keys, without copying all ~300 settings
    twice (~0.4 ms a graph); nothing while drawing changes other settings."""
    import matplotlib
    rcParams: Any = matplotlib.rcParams     # its stubs index it by literal keys only
    before = {key: rcParams[key] for key in settings}
    try:
        rcParams.update(settings)
        yield
    finally:
        rcParams.update(before)


def render_graph(series_list: list, params: dict, fmt: str = 'png',
                 prepared_figure: bool = True) -> tuple[bytes, str]:
    """Draw ``series_list`` with graphite render ``params``; returns (image bytes, MIME type).

    ``fmt`` is png, svg or pdf; ``params['graphType'] == 'pie'`` draws a pie chart.
    A common line graph PNG is drawn on this thread's prepared figure (agg.thread_figure)
    unless ``prepared_figure`` is False (tests draw both ways and compare).
    """
    from matplotlib.figure import Figure

    fmt = (fmt or 'png').lower()
    if fmt not in CONTENT_TYPES:
        raise ValueError('unsupported image format %r' % fmt)
    options = GraphOptions(params)
    width = max(1, options.int('width'))
    height = max(1, options.int('height'))
    line = options.str('graphType') != 'pie'
    prepared = None
    if fmt == 'png' and line and prepared_figure:
        from webapp.graphs.line import look, reusable
        if reusable(series_list, options):
            from webapp.graphs.agg import thread_figure
            prepared = thread_figure(threading.get_ident(), width, height, DPI,
                                     look(options))
    if prepared is None:
        fig = Figure(figsize=(width / DPI, height / DPI), dpi=DPI,
                     facecolor=parse_color(options.str('bgcolor')))
        _canvas(fig, fmt)
    with _rc({'font.family': options.str('fontName'),
              'font.weight': 'bold' if options.bool('fontBold') else 'normal',
              'font.style': 'italic' if options.bool('fontItalic') else 'normal',
              'svg.hashsalt': 'graphite', 'path.simplify': True}):
        if not line:
            from webapp.graphs.pie import draw_pie_graph
            from webapp.render.series import materialize_all
            materialize_all(series_list)    # a line graph takes packed rows as they are
            draw_pie_graph(fig, series_list, options)
        elif prepared is None:
            from webapp.graphs.line import draw_line_graph
            draw_line_graph(fig, series_list, options)
        else:
            from webapp.graphs.line import draw_line_graph, graph_tz
            ax = prepared.begin(parse_color(options.str('bgcolor')), graph_tz(options))
            fig = prepared.figure
            draw_line_graph(fig, series_list, options, ax, prepared.styled, prepared.kept)
        if fmt == 'png':    # drawn on the Agg canvas, written by webapp.graphs.png
            from webapp.graphs.png import encode_rgba
            canvas: Any = fig.canvas
            canvas.draw()
            body = encode_rgba(canvas.buffer_rgba(), DPI)
        else:
            buffer = io.BytesIO()
            fig.savefig(buffer, format=fmt, dpi=DPI, facecolor=fig.get_facecolor(),
                        metadata={'Date': None})
            body = buffer.getvalue()
    if prepared is not None:
        prepared.done()
    return body, CONTENT_TYPES[fmt]
