"""What the gallery against graphite-web 1.1.10 showed wrong or different, checked on the
drawn image: legend columns that fit the image, colorList dealt out skipping series with a
colour of their own, a log axis with unit labels at each power of the base, pie charts
(size, value labels), and x/y tick labels spaced and written as graphite-web does."""

from __future__ import annotations

import io
import re
from typing import Any

import numpy as np
from PIL import Image

from webapp.graphs import render_graph
from webapp.graphs.axis import axis_label
from webapp.graphs.legend import legend_columns, row_major
from webapp.graphs.time_axis import choose_row
from webapp.render.series import TimeSeries

DAY = 86400
BLUE, GREEN, RED = (100, 100, 255), (0, 200, 0), (200, 0, 50)


def wave(name: str, low: float, high: float, points: int = 48) -> TimeSeries:
    step = DAY // points
    values = [low + (high - low) * ((i * 7) % points) / (points - 1) for i in range(points)]
    return TimeSeries(name, 0, DAY, step, values)


def png(series: list, **params: Any) -> Image.Image:
    params.setdefault('width', 500)
    params.setdefault('height', 300)
    return Image.open(io.BytesIO(render_graph(series, params, 'png')[0])).convert('RGB')


def svg_texts(series: list, **params: Any) -> list[str]:
    params.setdefault('width', 500)
    params.setdefault('height', 300)
    return re.findall(r'<!-- (.*?) -->', render_graph(series, params, 'svg')[0].decode())


def colours(image: Image.Image) -> set:
    return {rgb for _count, rgb in image.getcolors(1 << 20)}


def test_long_legend_labels_stay_inside_the_image() -> None:
    names = ['servers.%s.load.shortterm' % h for h in ('db1', 'web1', 'web2')]
    image = png([wave(n, 0, 3) for n in names], bgcolor='000000', fgcolor='ffffff')
    width, height = image.size
    # the legend's text is white; none of it may reach the 10 px margin on either side
    band = image.crop((0, height - 60, width, height))
    for x in list(range(0, 8)) + list(range(width - 8, width)):
        assert all(band.getpixel((x, y)) == (0, 0, 0) for y in range(60)), x
    assert legend_columns(names, 10, 480) == 2                  # two fit, three do not
    assert legend_columns(['a', 'b', 'c'], 10, 480) == 3


def test_legend_items_run_row_by_row() -> None:
    # matplotlib fills columns; the order given to it puts item i at row i // 3
    assert row_major(list(range(7)), 3) == [0, 3, 6, 1, 4, 2, 5]
    assert row_major(list(range(4)), 1) == [0, 1, 2, 3]


def test_own_colour_does_not_use_up_the_color_list() -> None:
    red = wave('red', 0, 3)
    red.color = 'ff0000'
    drawn = colours(png([red, wave('auto', 1, 2)], lineWidth=3))
    assert (255, 0, 0) in drawn and BLUE in drawn     # the second series gets the first
    assert GREEN not in drawn                          # colour of the list, not the second
    both = colours(png([wave('a', 0, 3), wave('b', 1, 2)], lineWidth=3))
    assert BLUE in both and GREEN in both


def test_log_axis_has_unit_labels_at_each_power() -> None:
    series = [wave('big', 4.2e5, 7.7e6), wave('small', 0.31, 1.7)]
    labels = [t for t in svg_texts(series, logBase=10, hideLegend=True) if ':' not in t]
    assert labels == ['0.10', '1.0', '10.0', '100.0', '1.0 k', '10.0 k', '100.0 k', '1.0 M',
                      '10.0 M']                 # as graphite-web 1.1.10 writes them
    labels = [t for t in svg_texts(series, logBase=10, hideLegend=True,
                                   yUnitSystem='none') if ':' not in t]
    assert labels[-1] == '10000000.0' and labels[0] == '0.10'
    only_big = [t for t in svg_texts([series[0]], logBase=10, hideLegend=True) if ':' not in t]
    assert only_big == ['100.0 k', '1.0 M', '10.0 M']


def test_pie_percent_labels_for_small_values() -> None:
    series = [wave('a', 1, 1), wave('b', 2, 2), wave('c', 3, 3)]
    texts = svg_texts(series, graphType='pie', hideLegend=True)
    assert sorted(texts) == ['17%', '33%', '50%']     # percents, not values, against the min
    texts = svg_texts(series, graphType='pie', hideLegend=True, valueLabelsMin=20)
    assert sorted(texts) == ['33%', '50%']
    texts = svg_texts([wave('a', 1.5, 1.5), wave('b', 12.7, 12.7)], graphType='pie',
                      hideLegend=True, valueLabels='number', valueLabelsMin=1)
    assert sorted(texts) == ['1.50', '12']             # graphite-web's number format


def test_pie_fills_the_room_left_by_margin_and_legend() -> None:
    series = [wave('a', 1, 1), wave('b', 2, 2), wave('c', 3, 3)]
    image = png(series, graphType='pie', valueLabels='none')
    pixels = np.asarray(image)
    keep = np.zeros(pixels.shape[:2], dtype=bool)
    for rgb in (BLUE, GREEN, RED):
        keep |= (pixels == rgb).all(axis=2)
    slices = Image.fromarray((keep * 255).astype('uint8'))
    left, top, right, bottom = slices.crop((0, 0, 500, 262)).getbbox()
    # 300 px high: 10 px margins and one legend row (~27 px) leave ~250 px; 95 % of it
    assert bottom - top >= 230 and abs((right - left) - (bottom - top)) <= 3
    assert slices.crop((0, 262, 500, 300)).getbbox() is not None      # the legend's samples
    image = png(series, graphType='pie', valueLabels='none', hideLegend=True)
    assert image.getpixel((250, 20)) == BLUE and image.getpixel((250, 280)) in (GREEN, RED)


def test_x_labels_as_graphite_web_spaces_them() -> None:
    # 1 day over ~430 px: ~200 s a pixel -> every 4 hours, weekday and time
    day = [t for t in svg_texts([wave('a', 0, 3)], hideLegend=True) if ':' in t]
    assert day == ['Thu 00:00', 'Thu 04:00', 'Thu 08:00', 'Thu 12:00', 'Thu 16:00', 'Thu 20:00']
    # 3 hours: ~25 s a pixel -> every 20 minutes
    three = TimeSeries('b', 0, 3 * 3600, 60, [float(i % 5) for i in range(180)])
    hours = [t for t in svg_texts([three], hideLegend=True) if ':' in t]
    assert hours == ['%02d:%02d' % divmod(m, 60) for m in range(0, 180, 20)]
    assert choose_row(7 * DAY, 430).format == '%m/%d'
    assert choose_row(60, 430).format == '%H:%M:%S'


def test_x_labels_never_leave_the_image() -> None:
    # a label at the very end of the range would run past the right margin: left out
    series = TimeSeries('c', 0, 4 * 3600, 60, [1.0] * 240)
    labels = [t for t in svg_texts([series], hideLegend=True, width=300) if ':' in t]
    assert labels and '04:00' not in labels


def test_y_labels_as_graphite_web_writes_them() -> None:
    assert axis_label(0, 20, 100) == '0'
    assert axis_label(40, 20, 100) == '40.0'
    assert axis_label(2e6, 1e6, 4e6) == '2.0 M'             # prefix once the step reaches it
    assert axis_label(1500, 500, 2000) == '1500.0'
    assert axis_label(0.5, 0.25, 1) == '0.50'
    assert axis_label(1.5, 0.5, 2) == '1.50'                  # a span from 0.1 to 3
    assert axis_label(2048, 1024, 4096, 'binary') == '2.0 Ki'
