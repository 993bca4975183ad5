"""PNG / SVG / PDF rendering through matplotlib."""

import io
import struct
import xml.etree.ElementTree as ET

import pytest

from webapp.graphs import render_graph
from webapp.graphs.options import GraphOptions, parse_color
from webapp.graphs.pie import slice_values
from webapp.render.series import TimeSeries

START = 1_700_000_000


def series(name='a.b', values=None, step=60):
    values = values if values is not None else [i % 7 if i % 5 else None for i in range(60)]
    return TimeSeries(name, START, START + step * len(values), step, values)


def png_size(data):
    assert data[:8] == b'\x89PNG\r\n\x1a\n'
    assert data[12:16] == b'IHDR'
    return struct.unpack('>II', data[16:24])


def png_pixels(data):
    from PIL import Image
    return Image.open(io.BytesIO(data)).convert('RGB')


def test_png_default_size_and_content_type():
    data, ctype = render_graph([series()], {}, 'png')
    assert ctype == 'image/png'
    assert png_size(data) == (330, 250)


@pytest.mark.parametrize('width,height', [(800, 600), (200, 100)])
def test_png_requested_size(width, height):
    data, _ = render_graph([series()], {'width': str(width), 'height': str(height)}, 'png')
    assert png_size(data) == (width, height)


def test_svg_is_xml_with_requested_viewbox():
    data, ctype = render_graph([series(), series('c.d')], {'width': '400', 'height': '300',
                                                          'title': 'T & <x>'}, 'svg')
    assert ctype == 'image/svg+xml'
    root = ET.fromstring(data)
    assert root.tag.endswith('svg')
    assert root.get('viewBox') == '0 0 400 300'
    assert b'T &amp; &lt;x&gt;' in data or 'T & <x>' in ''.join(root.itertext())


def test_pdf_output():
    data, ctype = render_graph([series()], {}, 'pdf')
    assert ctype == 'application/pdf' and data.startswith(b'%PDF')


def test_unknown_format_rejected():
    with pytest.raises(ValueError):
        render_graph([series()], {}, 'gif')


def test_background_colour_applies():
    data, _ = render_graph([series()], {'bgcolor': 'black', 'hideLegend': 'true'}, 'png')
    assert png_pixels(data).getpixel((1, 1)) == (0, 0, 0)
    data, _ = render_graph([series()], {'bgcolor': '00ff00'}, 'png')
    assert png_pixels(data).getpixel((1, 1)) == (0, 255, 0)
    data, _ = render_graph([series()], {}, 'png')
    assert png_pixels(data).getpixel((1, 1)) == (255, 255, 255)


def count_color(image, rgb, tolerance=40):
    return sum(1 for p in image.get_flattened_data()
               if all(abs(a - b) <= tolerance for a, b in zip(p, rgb, strict=True)))


def test_series_colour_and_color_list_are_used():
    s = series(values=[float(i) for i in range(60)])
    s.color = 'ff0000'
    red = png_pixels(render_graph([s], {'hideLegend': 'true', 'hideGrid': 'true'}, 'png')[0])
    assert count_color(red, (255, 0, 0)) > 20
    plain = series(values=[float(i) for i in range(60)])
    green = png_pixels(render_graph([plain], {'colorList': '00ff00', 'hideGrid': 'true',
                                              'hideLegend': 'true'}, 'png')[0])
    assert count_color(green, (0, 255, 0)) > 20 and count_color(green, (255, 0, 0)) == 0


def test_area_mode_fills_more_pixels_than_lines():
    values = [float(i) for i in range(60)]
    common = {'hideLegend': 'true', 'hideGrid': 'true', 'colorList': '0000ff'}
    line = png_pixels(render_graph([series(values=values)], common, 'png')[0])
    area = png_pixels(render_graph([series(values=values)], dict(common, areaMode='all'),
                                   'png')[0])
    assert count_color(area, (0, 0, 255)) > 5 * count_color(line, (0, 0, 255))


def test_options_change_output():
    def two():
        return [series('x', [i * 100.0 if i % 7 else None for i in range(60)]),
                series('y', [3000.0] * 60)]
    base = render_graph(two(), {}, 'png')[0]
    variants = [{'title': 'Hello'}, {'vtitle': 'units'}, {'yMin': '-10', 'yMax': '50'},
                {'hideAxes': 'true'}, {'hideGrid': 'true'}, {'lineMode': 'staircase'},
                {'lineMode': 'connected'}, {'lineWidth': '4'}, {'fgcolor': 'red'},
                {'areaMode': 'stacked'}, {'areaMode': 'first'}, {'logBase': '10'},
                {'drawNullAsZero': 'true'}, {'hideLegend': 'true'}, {'graphOnly': 'true'},
                {'yUnitSystem': 'binary'}]
    outputs = {render_graph(two(), v, 'png')[0] for v in variants}
    assert base not in outputs
    assert len(outputs) == len(variants)


def test_per_series_options_change_output():
    def draw(mutate):
        s = [series('x', [float(i % 9) for i in range(60)]), series('y', [3.0] * 60)]
        mutate(s)
        return render_graph(s, {}, 'png')[0]
    base = draw(lambda s: None)
    changes = [
        lambda s: s[0].options.update(lineWidth=5),
        lambda s: s[0].options.update(dashed=5),
        lambda s: s[1].options.update(secondYAxis=True),
        lambda s: s[0].options.update(drawAsInfinite=True),
        lambda s: s[0].options.update(alpha=0.2),
        lambda s: [x.options.update(stacked=True) for x in s],
        lambda s: s[0].options.update(invisible=True, stacked=True),
    ]
    outputs = [draw(change) for change in changes]
    assert all(out != base for out in outputs)
    assert len(set(outputs)) == len(outputs)


def test_no_data_and_all_none():
    data, _ = render_graph([], {}, 'png')
    assert png_size(data) == (330, 250)
    data, _ = render_graph([series(values=[None] * 10)], {}, 'svg')
    ET.fromstring(data)


def test_consolidates_long_series_to_width():
    long = series(values=[float(i % 13) for i in range(5000)], step=10)
    data, _ = render_graph([long], {'width': '200'}, 'png')
    assert png_size(data)[0] == 200
    # merged to at most one point a pixel (applied at once: fewer points, a longer step)
    assert long.valuesPerPoint > 1 or (len(long) <= 200 and long.step > 10)
    assert list(long)[0] == sum(i % 13 for i in range(long.step // 10)) / (long.step // 10)


def test_pie_graph():
    s = [series('a', [1.0, 3.0]), series('b', [6.0, 6.0]), series('c', [None, None])]
    data, ctype = render_graph(s, {'graphType': 'pie'}, 'png')
    assert ctype == 'image/png' and png_size(data) == (330, 250)
    svg, _ = render_graph(s, {'graphType': 'pie', 'pieMode': 'maximum'}, 'svg')
    ET.fromstring(svg)
    assert render_graph(s, {'graphType': 'pie', 'valueLabels': 'number'}, 'png')[0] != data


@pytest.mark.parametrize('mode,expected', [
    ('average', [('a', 2.0), ('b', 6.0)]),
    ('maximum', [('a', 3.0), ('b', 6.0)]),
    ('minimum', [('a', 1.0), ('b', 6.0)]),
])
def test_pie_modes(mode, expected):
    s = [series('a', [1.0, None, 3.0]), series('b', [6.0, 6.0, 6.0]), series('c', [None])]
    assert slice_values(s, GraphOptions({'pieMode': mode})) == expected


def test_pie_slices_use_series_colour():
    s = [series('a', [1.0]), series('b', [1.0])]
    s[0].color = 'ff0000'
    image = png_pixels(render_graph(s, {'graphType': 'pie', 'hideLegend': 'true',
                                        'colorList': '0000ff'}, 'png')[0])
    assert count_color(image, (255, 0, 0), 10) > 500
    assert count_color(image, (0, 0, 255), 10) > 500


@pytest.mark.parametrize('text,rgba', [
    ('red', (200 / 255, 0, 50 / 255, 1.0)),
    ('ff8000', (1.0, 128 / 255, 0, 1.0)),
    ('#ff800080', (1.0, 128 / 255, 0, 128 / 255)),
    ('%23000000', (0, 0, 0, 1.0)),
    ('navy', (0, 0, 128 / 255, 1.0)),
])
def test_parse_color(text, rgba):
    assert parse_color(text) == pytest.approx(rgba)


def test_graph_options_accept_lists_and_bools():
    opts = GraphOptions({'width': ['100', '200'], 'hideLegend': True, 'yMin': ''})
    assert opts.int('width') == 200 and opts.bool('hideLegend') is True
    assert opts.float('yMin') is None and opts.int('height') == 250


def test_axis_and_alias_options_change_output():
    def two():
        a = series('x', [float(i % 9) if i % 6 else None for i in range(60)])
        b = series('y', [3.0] * 60)
        b.options['secondYAxis'] = True
        return [a, b]
    base = render_graph(two(), {}, 'png')[0]
    variants = [{'leftColor': 'red'}, {'rightColor': 'red'}, {'leftWidth': 4},
                {'rightDashed': True}, {'thickness': 4}, {'yMinLeft': -5}, {'yMaxRight': 50},
                {'lineMode': 'connected', 'connectedLimit': 3}, {'legendMaxItems': 1}]
    outputs = [render_graph(two(), v, 'png')[0] for v in variants]
    assert base not in outputs and len(set(outputs)) == len(outputs)
    assert render_graph(two(), {'min': -5}, 'png')[0] == \
        render_graph(two(), {'yMin': -5}, 'png')[0]
