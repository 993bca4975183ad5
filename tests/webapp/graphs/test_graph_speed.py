"""What makes a PNG answer cheaper without changing a pixel: our own PNG writer (one row
filter, a fast zlib level), and one Agg renderer a thread and image size, reused (so
matplotlib's text metrics cache, one per renderer, stays warm across requests)."""

from __future__ import annotations

import io
import re
import struct
import threading
import zlib
from typing import Any

import numpy as np
from PIL import Image

from webapp.graphs import render_graph
from webapp.graphs.agg import thread_renderer as _thread_renderer
from webapp.render.series import TimeSeries

START = 1_700_000_000


def wave(name: str, phase: int, points: int = 1000) -> TimeSeries:
    values = [float((i * 7 + phase) % 97) if (i + phase) % 31 else None for i in range(points)]
    return TimeSeries(name, START, START + 60 * points, 60, values)


def idat(data: bytes) -> bytes:
    """The concatenated IDAT payload (the zlib stream) of a PNG."""
    at, out = 8, b''
    while at < len(data):
        (length,) = struct.unpack('>I', data[at:at + 4])
        if data[at + 4:at + 8] == b'IDAT':
            out += data[at + 8:at + 8 + length]
        at += 12 + length
    return out


def pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert('RGBA'))


def chunks(data: bytes) -> list[bytes]:
    """The chunk types of a PNG, in order."""
    at, out = 8, []
    while at < len(data):
        (length,) = struct.unpack('>I', data[at:at + 4])
        out.append(data[at + 4:at + 8])
        at += 12 + length
    return out


def test_png_rows_are_up_filtered_and_deflated_at_the_fast_level_and_strategy() -> None:
    data, _ = render_graph([wave('a.%d' % i, i) for i in range(36)], {}, 'png')
    stream = idat(data)
    # the zlib header names the level class: 0 is "fastest" (level 1), 2 is the default
    assert stream[1] >> 6 == 0
    raw = zlib.decompress(stream)
    assert len(raw) == 250 * (1 + 330 * 4)          # RGBA rows, each with its filter byte
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(250, 1 + 330 * 4)
    assert (rows[:, 0] == 2).all()                  # PNG's "Up" filter on every row
    # run-length matches only: the very stream zlib's Z_RLE strategy makes (window 15,
    # memLevel 9), which differs from level 1's default strategy
    for strategy in (zlib.Z_RLE, zlib.Z_DEFAULT_STRATEGY):
        packer = zlib.compressobj(1, zlib.DEFLATED, 15, 9, strategy)
        assert (packer.compress(raw) + packer.flush() == stream) is (strategy == zlib.Z_RLE)
    image = Image.open(io.BytesIO(data))
    assert image.mode == 'RGBA' and [round(v) for v in image.info['dpi']] == [72, 72]
    assert image.info['Software'].startswith('Matplotlib version')
    assert chunks(data) == [b'IHDR', b'tEXt', b'pHYs', b'IDAT', b'IEND']


def test_png_decodes_to_the_pixels_matplotlib_and_pillow_write() -> None:
    """The same figure saved by matplotlib's own writer (Pillow, adaptive row filters)
    and by webapp.graphs.png decodes to the same RGBA pixels, at two sizes, opaque and
    with transparent and half-transparent pixels (random bytes: every filter path)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from webapp.graphs.png import encode_rgba
    rng = np.random.default_rng(7)
    for width, height, alpha in ((330, 250, 1.0), (97, 31, 0.5), (1, 1, 0.0)):
        fig = Figure(figsize=(width / 72.0, height / 72.0), dpi=72.0)
        canvas = FigureCanvasAgg(fig)
        fig.patch.set_alpha(alpha)
        if width > 1:
            fig.figimage(rng.integers(0, 256, (height // 2, width // 2, 4), dtype=np.uint8),
                         3, 2)
        fig.add_subplot(1, 1, 1).plot([0, 1, 3], [2, 0, 5], alpha=0.7)
        saved = io.BytesIO()
        fig.savefig(saved, format='png', dpi=72.0)
        drawn = np.asarray(canvas.buffer_rgba()).copy()
        ours = encode_rgba(drawn, 72.0)
        assert np.array_equal(pixels(ours), drawn)
        assert np.array_equal(pixels(ours), pixels(saved.getvalue()))


def test_a_thread_reuses_its_renderer_and_leaves_nothing_behind() -> None:
    many = [wave('a.%d' % i, i) for i in range(36)]
    one = [wave('b.only', 5)]
    first = render_graph(one, {'bgcolor': '000000'}, 'png')[0]
    before = _thread_renderer.cache_info()
    render_graph(many, {}, 'png')                     # the same size: the same renderer
    again = render_graph([wave('b.only', 5)], {'bgcolor': '000000'}, 'png')[0]
    assert _thread_renderer.cache_info().hits >= before.hits + 2
    assert np.array_equal(pixels(first), pixels(again))   # cleared: no line of the others

    seen: list = []

    def other() -> None:
        render_graph([wave('c', 1)], {}, 'png')
        seen.append(_thread_renderer(threading.get_ident(), 330, 250, 72.0))
    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    mine = _thread_renderer(threading.get_ident(), 330, 250, 72.0)
    assert seen and seen[0] is not mine              # never shared between threads


def test_big_images_get_a_renderer_of_their_own() -> None:
    before = _thread_renderer.cache_info()
    data = render_graph([wave('a', 1)], {'width': 1200, 'height': 900}, 'png')[0]
    assert Image.open(io.BytesIO(data)).size == (1200, 900)
    assert _thread_renderer.cache_info().misses == before.misses    # not kept


def test_y_grid_is_one_collection_with_every_line() -> None:
    rising = TimeSeries('r', START, START + 60 * 100, 60, [float(i) for i in range(100)])
    svg = render_graph([rising], {'hideLegend': 'true', 'majorGridLineColor': 'ff0000',
                                  'minorGridLineColor': '0000ff'}, 'svg')[0].decode()
    labels = ['0', '20', '40', '60', '80', '100']       # 0..99: majors every 20
    assert re.findall(r'<!-- (\d+\.?\d*) -->', svg) == [v + '.0' if v != '0' else v
                                                       for v in labels]
    # one Tick (two lines, two texts) a labelled value only: minor values have none
    assert svg.count('id="ytick_') == len(labels)
    # still a line at each major value and each minor one between them
    assert svg.count('stroke: #ff0000; stroke-width: 0.4') == len(labels)
    assert svg.count('stroke: #0000ff; stroke-width: 0.3') == len(labels) - 1


def test_cached_glyphs_draw_the_pixels_matplotlib_draws() -> None:
    """The twin check of webapp.graphs.agg: the same texts at the same places (whole and
    fractional pixels, turned for vtitles, two sizes, twice so the second pass comes
    from the caches) on a CachingRenderer and on matplotlib's RendererAgg."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    from webapp.graphs.agg import CachingRenderer, glyph_api

    texts = ['Sat 00:00', '100.0', '1.0 M', 'servers.web1.cpu.user', 'gjpqy ÄÖ %', '']
    places = [(10.0, 20.0), (10.25, 20.5), (33.7, 41.3), (100.015625, 77.9)]

    def draw(renderer: Any, passes: int) -> np.ndarray:
        for _ in range(passes):
            renderer.clear()
            gc = renderer.new_gc()
            gc.set_foreground((0.2, 0.1, 0.6))
            for size in (8.0, 11.0):
                prop = FontProperties(family='DejaVu Sans', size=size)
                for i, text in enumerate(texts):
                    for j, (x, y) in enumerate(places):
                        angle = (0.0, 90.0, 270.0)[(i + j) % 3]
                        renderer.draw_text(gc, x + 60 * (i % 3), y + 40 * j + size, text,
                                           prop, angle)
            gc.restore()
        return np.asarray(renderer.buffer_rgba()).copy()

    cached = CachingRenderer(330, 250, 72.0)
    mine = draw(cached, 2)
    assert glyph_api() is False or cached.glyphs          # the caches were used
    assert np.array_equal(mine, draw(RendererAgg(330, 250, 72.0), 1))
    assert mine[..., 3].any()


def _packed_and_lists() -> tuple[list, list]:
    """The same series twice: as packed whisper rows (what a graph's bare path targets
    bring) and as value lists: gaps, NaN values, a row too short to be merged, other
    consolidation functions (one merged in numpy, one not), two blocks of one width."""
    from webapp.render.series import PackedSeries
    from webapp.storage.packed import Block, PackedValues
    rng = np.random.default_rng(3)
    values = rng.normal(50.0, 20.0, (5, 1000))
    valid = rng.random((5, 1000)) > 0.05
    values[2, 100:140] = np.nan                   # stored NaN: drawn as a gap
    valid[3, :] = True
    first = Block(values[:4].copy(), valid[:4].copy(), (START, START + 60000, 60))
    second = Block(values[4:].copy(), valid[4:].copy(), (START, START + 60000, 60))
    short = Block(values[:1, :200].copy(), valid[:1, :200].copy(), (START, START + 12000, 60))
    rows = [(first, r) for r in range(4)] + [(second, 0), (short, 0)]
    functions = ['average', 'max', 'sum', 'last', 'min', 'average']
    packed, lists = [], []
    for i, ((block, row), func) in enumerate(zip(rows, functions, strict=True)):
        end = START + 60 * block.points
        one = PackedSeries('p.%d' % i, START, end, 60, PackedValues(block, row))
        other = TimeSeries('p.%d' % i, START, end, 60, PackedValues(block, row).tolist())
        one.consolidationFunc = other.consolidationFunc = func
        packed.append(one)
        lists.append(other)
    return packed, lists


def test_packed_rows_draw_the_pixels_of_their_value_lists() -> None:
    for params in ({}, {'width': '1200', 'height': '300'}, {'hideLegend': 'false'},
                   {'minXStep': '3', 'areaMode': 'first'}):
        packed, lists = _packed_and_lists()
        image = pixels(render_graph(packed, dict(params), 'png')[0])
        assert all(s.packed is None for s in packed)              # all drawn from rows
        assert np.array_equal(image, pixels(render_graph(lists, dict(params), 'png')[0]))
        packed, lists = _packed_and_lists()
        assert render_graph(packed, dict(params), 'svg')[0] == \
            render_graph(lists, dict(params), 'svg')[0]


def test_a_big_png_is_written_in_blocks_of_rows_and_decodes_the_same(
        monkeypatch: Any) -> None:
    from webapp.graphs import png
    rng = np.random.default_rng(11)
    image = rng.integers(0, 256, (37, 23, 4), dtype=np.uint8)
    image[10:20] = image[9]                       # repeated rows: zero rows once filtered
    whole = png.encode_rgba(image, 72.0)
    monkeypatch.setattr(png, 'BLOCK_BYTES', 3 * (23 * 4 + 1))     # 3 rows a block
    blocks = png.encode_rgba(image, 72.0)
    assert np.array_equal(pixels(whole), image)
    assert np.array_equal(pixels(blocks), image)
    assert zlib.decompress(idat(blocks)) == zlib.decompress(idat(whole))
