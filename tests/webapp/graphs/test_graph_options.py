"""Graph options checked on the drawn image: yStep, yStepLeft/Right, yLimit, yLimitLeft/Right,
yDivisors (tick labels of the SVG), minXStep (vertices of the drawn line), margin (where the
PNG has ink) and template (colours of the PNG, through the app and graphTemplates.conf).

Expected axes follow graphite-web 1.1.10's tick choice and label format (one decimal when
the span is over 10, '0' written as %g; webapp/graphs/axis.py)."""

from __future__ import annotations

import io
import random
import re
from typing import Any

import pytest
from PIL import Image

from tests.webapp.helpers import call
from webapp.app import make_app
from webapp.graphs import render_graph
from webapp.graphs.axis import AxisError, linear_scale, tick_values
from webapp.render.series import TimeSeries

DAY = 86400


def ramp(top: float = 87.0, name: str = 'a.b', points: int = 24) -> TimeSeries:
    """``points`` values from 0 to ``top`` over a day."""
    step = DAY // points
    return TimeSeries(name, 0, DAY, step, [i * top / (points - 1) for i in range(points)])


def svg_labels(series: list, **params: Any) -> list[str]:
    params.setdefault('hideLegend', True)
    params.setdefault('width', 400)
    params.setdefault('height', 300)
    svg = render_graph(series, params, 'svg')[0].decode()
    return re.findall(r'<!-- (.*?) -->', svg)


def y_labels(series: list, **params: Any) -> list[str]:
    return [label for label in svg_labels(series, **params) if ':' not in label]


def png(series: list, **params: Any) -> Image.Image:
    params.setdefault('width', 400)
    params.setdefault('height', 300)
    return Image.open(io.BytesIO(render_graph(series, params, 'png')[0])).convert('RGB')


def test_default_step_as_graphite_web_chooses() -> None:
    # 0..87 with divisors 4,5,6: step 20 over 5 divisions leaves the least slop
    assert y_labels([ramp()]) == ['0', '20.0', '40.0', '60.0', '80.0', '100.0']
    assert tick_values(linear_scale(0, 87)) == [0, 20, 40, 60, 80, 100]


def test_y_step() -> None:
    assert y_labels([ramp()], yStep=25) == ['0', '25.0', '50.0', '75.0', '100.0']
    assert y_labels([ramp()], yStep=10) == ['0'] + ['%d.0' % v for v in range(10, 100, 10)]


def test_y_divisors() -> None:
    assert y_labels([ramp()], yDivisors='3') == ['0', '50.0', '100.0']
    assert y_labels([ramp()], yDivisors='2') == ['0', '50.0', '100.0']
    assert y_labels([ramp(top=9.3)], yDivisors='10') == ['0'] + ['%d.0' % v for v in range(1, 11)]


def test_y_limit() -> None:
    # a limit below the data caps the axis; above it, it changes nothing
    assert y_labels([ramp()], yLimit=60) == ['0', '10.0', '20.0', '30.0', '40.0', '50.0', '60.0']
    assert y_labels([ramp()], yLimit=200) == y_labels([ramp()])
    # a limit between the data's top and the rounded-up top keeps the axis at the limit
    assert y_labels([ramp()], yLimit=90, yStep=20) == ['0', '20.0', '40.0', '60.0', '80.0']
    scale = linear_scale(0, 87, axis_limit=90, step=20)
    assert (scale.bottom, scale.top) == (0, 90)


def two_axes() -> list:
    right = ramp(top=870.0, name='a.c')
    right.options['secondYAxis'] = True
    return [ramp(), right]


def test_y_step_and_limit_left_and_right() -> None:
    labels = y_labels(two_axes(), yStepLeft=25, yStepRight=300)
    assert labels == ['0', '25.0', '50.0', '75.0', '100.0', '0', '300.0', '600.0', '900.0']
    labels = y_labels(two_axes(), yLimitLeft=50, yLimitRight=400)
    assert labels == ['0', '10.0', '20.0', '30.0', '40.0', '50.0',
                      '0', '100.0', '200.0', '300.0', '400.0']
    # single-axis names do not reach a graph with two axes (as in graphite-web)
    assert y_labels(two_axes(), yStep=25) == y_labels(two_axes())


def test_axis_errors_are_named() -> None:
    with pytest.raises(AxisError, match='min must be less than the max'):
        linear_scale(0, 10, axis_min=5, axis_max=1)
    with pytest.raises(AxisError, match='step size must be positive'):
        linear_scale(0, 10, step=-1)


def line_vertices(series: list, **params: Any) -> int:
    params.update(hideLegend=True, width=400, height=300, colorList='00ff00')
    svg = render_graph(series, params, 'svg')[0].decode()
    paths = re.findall(r'<path d="([^"]*)"[^>]*style="[^"]*stroke: #00ff00', svg, re.S)
    assert len(paths) == 1, 'one green line expected'
    return len(re.findall(r'[ML]', paths[0]))


def test_min_x_step() -> None:
    rng = random.Random(7)
    values = [rng.random() * 100 for _ in range(240)]
    series = lambda: [TimeSeries('r', 0, DAY, DAY // 240, values)]  # noqa: E731
    assert line_vertices(series()) > 200          # ~330 px for 240 points: all drawn
    # 5 px per point: 66 drawable points, so 4 points merged into each one (60 left)
    assert line_vertices(series(), minXStep=5) == 60
    assert line_vertices(series(), minXStep=2) == 120


def ink_box(image: Image.Image) -> tuple[int, int, int, int]:
    box = image.getbbox()          # non-black pixels (the background is black)
    assert box is not None
    return box


@pytest.mark.parametrize('margin', [5, 10, 50])
def test_margin_keeps_everything_inside(margin: int) -> None:
    params = dict(bgcolor='000000', fgcolor='ffffff', margin=margin, title='Title')
    for series, extra in (([ramp()], {'hideLegend': True}), (two_axes(), {})):
        left, top, right, bottom = ink_box(png(series, **params, **extra))
        assert left >= margin and top >= margin - 1
        assert right <= 400 - margin and bottom <= 300 - margin
        # and the graph uses the room: ink within 25 px of the margin on every side
        assert left <= margin + 25 and top <= margin + 25
        assert right >= 400 - margin - 25 and bottom >= 300 - margin - 25


TEMPLATES = """
[default]
background = 112233
foreground = ffffff
lineColors = ffff00

[dark]
background = 000000
lineColors = ff00ff,00ffff
majorLine = 00ff00
"""


@pytest.fixture
def template_app(tmp_path: Any, whisper_tree: str, make_web_settings: Any) -> Any:
    conf = tmp_path / 'graphTemplates.conf'
    conf.write_text(TEMPLATES)
    application = make_app(make_web_settings(WHISPER_DIR=whisper_tree,
                                             GRAPHTEMPLATES_CONF=str(conf)))
    yield application
    application.close()


def drawn(app: Any, **params: Any) -> tuple[tuple, set]:
    query = dict(target='servers.web1.cpu', width='300', height='200', **params)
    status, headers, body = call(app, '/render', query)
    assert status == 200 and headers['Content-Type'] == 'image/png', body[:200]
    image = Image.open(io.BytesIO(body)).convert('RGB')
    return image.getpixel((1, 1)), {rgb for _n, rgb in image.getcolors(1 << 20)}


def test_template(template_app: Any, app: Any) -> None:
    corner, colors = drawn(template_app)
    assert corner == (0x11, 0x22, 0x33)                 # [default] replaces the built-ins
    assert (255, 255, 0) in colors
    corner, colors = drawn(template_app, template='dark')
    assert corner == (0, 0, 0) and (255, 0, 255) in colors and (255, 255, 0) not in colors
    assert any(g > 60 and r < 20 and b < 20 for r, g, b in colors)  # its (thin) major grid
    corner, colors = drawn(template_app, template='dark', bgcolor='ff0000')
    assert corner == (255, 0, 0)                        # the graph's own option wins
    assert drawn(template_app, template='nosuch')[0] == (0x11, 0x22, 0x33)
    assert drawn(app, template='dark')[0] == (255, 255, 255)   # no file: built-in look


def test_template_file_parsed_once_and_reread_when_changed(template_app: Any,
                                                           tmp_path: Any) -> None:
    from webapp.graphs import templates
    conf = tmp_path / 'graphTemplates.conf'
    templates._sections.cache_clear()
    assert drawn(template_app)[0] == (0x11, 0x22, 0x33)
    drawn(template_app, template='dark')
    assert templates._sections.cache_info().misses == 1      # one parse for both images
    conf.write_text(TEMPLATES.replace('background = 112233', 'background = 445566') + '#\n')
    assert drawn(template_app)[0] == (0x44, 0x55, 0x66)       # the edit is seen
    conf.unlink()
    assert drawn(template_app)[0] == (255, 255, 255)          # gone: built-in look
