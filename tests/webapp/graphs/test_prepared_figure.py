"""A line graph drawn on this thread's prepared (reused) Figure and Axes has the very
pixels of the same graph drawn on a new Figure, whatever graphs came before it; each
thread has its own; graphs the prepared Axes does not cover get a new Figure."""

from __future__ import annotations

import io
import random
import threading
from typing import Any

import numpy as np
import pytest
from PIL import Image

from webapp.graphs import render_graph
from webapp.graphs.agg import thread_figure
from webapp.render.series import TimeSeries

START = 1_700_000_000


def wave(name: str, phase: int, points: int = 600, scale: float = 1.0,
         **options: Any) -> TimeSeries:
    values = [scale * float((i * 7 + phase) % 97) if (i + phase) % 31 else None
              for i in range(points)]
    series = TimeSeries(name, START, START + 60 * points, 60, values)
    series.options.update(options)
    return series


def pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert('RGBA'))


def _graphs() -> list[tuple[str, Any, dict]]:
    """(name, series maker, params): line graph options of the gallery's kinds, and some
    the prepared Axes does not take (log, second axis, hidden axes, axis titles), mixed."""
    many = lambda: [wave('servers.web%d.cpu' % i, i) for i in range(36)]       # noqa: E731
    few = lambda: [wave('servers.db%d.load' % i, 3 * i, scale=i + 1.0)          # noqa: E731
                   for i in range(3)]
    big = lambda: [wave('net.bytes', 2, scale=3.5e6), wave('net.pkts', 9, scale=1e3)]  # noqa
    return [
        ('many', many, {}),
        ('few-legend', few, {'title': 'Load', 'hideLegend': 'false'}),
        ('stacked', few, {'areaMode': 'stacked', 'yMin': '0'}),
        ('log', big, {'logBase': '10'}),
        ('dark', few, {'bgcolor': '000000', 'fgcolor': 'ffffff', 'fontSize': '12',
                       'majorGridLineColor': '888888', 'minorGridLineColor': '333333'}),
        ('area-first', big, {'areaMode': 'first', 'areaAlpha': '0.4',
                             'yUnitSystem': 'binary', 'title': 'Bytes'}),
        ('staircase', few, {'lineMode': 'staircase', 'minorY': '3', 'yStep': '50'}),
        ('second-axis', lambda: [wave('a', 1), wave('b', 4, secondYAxis=True)], {}),
        ('connected', few, {'lineMode': 'connected', 'drawNullAsZero': 'false',
                            'colorList': 'red,green,blue', 'lineWidth': '3'}),
        ('null-as-zero', few, {'drawNullAsZero': 'true', 'hideGrid': 'true',
                               'yMax': '400', 'tz': 'Europe/Berlin'}),
        ('hidden', many, {'hideAxes': 'true'}),
        ('infinite', lambda: [wave('a', 1), wave('b', 4, drawAsInfinite=True)],
         {'hideLegend': 'false', 'uniqueLegend': 'true'}),
        ('vtitle', few, {'vtitle': 'load', 'title': 'T'}),
        ('big-dashed', few, {'width': '500', 'height': '300', 'leftDashed': 'true',
                             'fontBold': 'true', 'hideLegend': 'false'}),
        ('all-area', many, {'areaMode': 'all', 'yMin': '-50', 'yMax': '150'}),
        ('y-right', few, {'yAxisSide': 'right'}),
        ('many-again', many, {}),
    ]


def _draw(graphs: list[tuple[str, Any, dict]]) -> dict[str, np.ndarray]:
    return {name: pixels(render_graph(make(), dict(params), 'png')[0])
            for name, make, params in graphs}


def test_a_graph_after_others_has_the_pixels_of_the_same_graph_drawn_fresh() -> None:
    graphs = _graphs()
    fresh = {}
    for name, make, params in graphs:
        thread_figure.cache_clear()                      # a new Figure for each one
        fresh[name] = pixels(render_graph(make(), dict(params), 'png')[0])
    order = list(graphs)
    for seed in (0, 1, 2):
        random.Random(seed).shuffle(order)
        thread_figure.cache_clear()
        reused = _draw(order + order)     # the second half all on figures drawn before
        for name, image in reused.items():
            assert np.array_equal(image, fresh[name]), (seed, name)
    # every graph but the repeated one looks different: a leftover would show
    assert len({image.tobytes() for image in fresh.values()}) == len(fresh) - 1


@pytest.mark.parametrize('params, reused', [
    ({}, True), ({'title': 'x', 'hideLegend': 'false', 'areaMode': 'stacked'}, True),
    ({'logBase': '2'}, False), ({'hideAxes': 'true'}, False), ({'graphOnly': 'true'}, False),
    ({'vtitle': 'v'}, False), ({'yAxisSide': 'right'}, False), ({'hideYAxis': 'true'}, False)])
def test_the_prepared_axes_is_kept_with_its_ticks_for_the_common_graph(
        params: dict, reused: bool) -> None:
    series = [wave('a.%d' % i, i) for i in range(5)]
    thread_figure.cache_clear()
    render_graph(series, dict(params), 'png')
    render_graph([wave('a.%d' % i, i) for i in range(5)], dict(params), 'png')
    info = thread_figure.cache_info()
    assert (info.hits, info.misses) == ((1, 1) if reused else (0, 0))
    if reused:
        figure = thread_figure(threading.get_ident(), 330, 250, 72.0, _default_look())
        ticks = list(figure.axes.yaxis.majorTicks)
        render_graph([wave('b', 3)], dict(params), 'png')
        assert figure.axes.yaxis.majorTicks[:len(ticks)] == ticks   # the same objects
        assert len(figure.figure.axes) == 1 and len(figure.axes.collections) >= 1


def _default_look() -> tuple:
    """The look (the cache key's last part) of a graph with default options."""
    from webapp.graphs.line import look
    from webapp.graphs.options import GraphOptions
    return look(GraphOptions({}))


def test_a_figure_is_never_shared_between_threads_and_a_failed_graph_is_not_reused() -> None:
    thread_figure.cache_clear()
    series = [wave('a.%d' % i, i) for i in range(4)]
    mine_first = pixels(render_graph(series, {}, 'png')[0])
    seen: list = []
    errors: list = []
    barrier = threading.Barrier(4)

    def other(phase: int) -> None:
        try:
            barrier.wait(timeout=30)
            for _ in range(3):      # at the same time, each with a different graph
                data = render_graph([wave('t%d.%d' % (phase, i), phase + i)
                                     for i in range(phase + 1)], {}, 'png')[0]
                seen.append((phase, pixels(data)))
            seen.append((phase, thread_figure(threading.get_ident(), 330, 250, 72.0,
                                              _default_look())))
        except Exception as error:   # pragma: no cover - reported below
            errors.append(error)
    threads = [threading.Thread(target=other, args=(p,)) for p in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    figures = [f for _p, f in seen if not isinstance(f, np.ndarray)]
    mine = thread_figure(threading.get_ident(), 330, 250, 72.0, _default_look())
    assert len({id(f) for f in figures + [mine]}) == 5
    for phase in range(4):          # each thread's three graphs alike: none drew on another's
        images = [i for p, i in seen if p == phase and isinstance(i, np.ndarray)]
        assert len(images) == 3 and all(np.array_equal(images[0], i) for i in images)
    # a graph failing half-way leaves its figure unclean: the next graph gets a new one
    before = mine.figure
    with pytest.raises(TypeError):
        render_graph([wave('bad', 1, lineWidth=object())], {}, 'png')
    assert not mine.clean
    assert np.array_equal(pixels(render_graph(series, {}, 'png')[0]), mine_first)
    assert mine.figure is not before and mine.clean


# option sets of the common line graph: sizes, fonts, colours, title, minor grid, time
# zones, unit systems, area modes, legends
LOOKS = [
    {},
    {'width': '600', 'height': '300', 'title': 'Requests', 'minorY': '3'},
    {'width': '200', 'height': '150', 'fontSize': '7'},
    {'fontName': 'DejaVu Serif', 'fontBold': 'true', 'fontItalic': 'true', 'fontSize': '13',
     'title': 'Serif bold', 'hideLegend': 'false'},
    {'bgcolor': '000000', 'fgcolor': 'ffcc00', 'majorGridLineColor': '884444',
     'minorGridLineColor': '223322', 'minorY': '4', 'tz': 'Europe/Berlin'},
    {'tz': 'America/New_York', 'yUnitSystem': 'binary', 'areaMode': 'stacked',
     'lineMode': 'staircase', 'title': 'Stacked'},
    {'tz': 'Asia/Kolkata', 'areaMode': 'first', 'yMin': '-20', 'yMax': '220',
     'hideGrid': 'true', 'hideLegend': 'false', 'lineWidth': '2'},
    {'from': 'week', 'yStep': '25', 'drawNullAsZero': 'true', 'fontSize': '11'},
]


def _look_series(params: dict) -> list[TimeSeries]:
    if params.get('from') == 'week':        # a week of hourly points: day labels
        return [TimeSeries('w.%d' % i, START, START + 3600 * 168, 3600,
                           [float((j * (i + 3)) % 101) for j in range(168)])
                for i in range(4)]
    scale = 3.5e6 if params.get('yUnitSystem') == 'binary' else 1.0
    return [wave('servers.web%d.cpu' % i, i, points=1000, scale=scale) for i in range(12)]


@pytest.mark.parametrize('params', LOOKS)
def test_directly_drawn_ticks_and_kept_collections_give_matplotlibs_own_pixels(
        params: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The prepared figure's ticks (marks and labels drawn with the renderer calls
    matplotlib makes, agg._draw_ticks_directly) and its kept line and grid collections
    give every pixel of the same graph drawn by matplotlib's own Figure.draw on a new
    Figure, the first time and when reused."""
    from matplotlib.text import Text
    params = {k: v for k, v in params.items() if k != 'from'} if 'from' in params else \
        dict(params)
    own = pixels(render_graph(_look_series(params), dict(params), 'png',
                              prepared_figure=False)[0])
    thread_figure.cache_clear()
    labels: list[str] = []
    text_draw = Text.draw

    def counted(text: Any, renderer: Any) -> Any:
        if text.get_visible() and text.get_text():
            labels.append(text.get_text())
        return text_draw(text, renderer)
    monkeypatch.setattr(Text, 'draw', counted)
    first = pixels(render_graph(_look_series(params), dict(params), 'png')[0])
    render_graph([wave('other', 5, scale=7.0)], dict(params), 'png')
    again = pixels(render_graph(_look_series(params), dict(params), 'png')[0])
    assert thread_figure.cache_info().hits == 2
    assert np.array_equal(first, own)
    assert np.array_equal(again, own)
    # no tick label went through Text.draw (only titles and legend texts do)
    assert set(labels) <= {params.get('title'), 'other'} | {'w.%d' % i for i in range(4)} | \
        {'servers.web%d.cpu' % i for i in range(12)}, labels
