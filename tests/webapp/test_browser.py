"""A real headless Chromium shows the graphs served by the graphite-render process.

Pages (from a tiny loopback server) embed ``<img src="http://127.0.0.1:<render
port>/render?...">`` on a magenta background. For a PNG the screenshot must show the graph
exactly where the page put it, pixel for pixel the PNG the server returns; an SVG must be
drawn inside its box (and match the PNG of the same graph closely) with the page untouched
outside it. Each graph type also gets a check of what it shows (stacked fills, pie slices,
the right axis's labels, staircase steps ...) on the screenshot itself.
"""

from __future__ import annotations

import io
import math
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlencode

import pytest

from tests.webapp.helpers import STEP, http_get, make_whisper, stop_server

ROOT = Path(__file__).resolve().parents[2]
WIDTH, HEIGHT = 600, 400
MAGENTA = (255, 0, 255)
BLUE, GREEN, RED = (100, 100, 255), (0, 200, 0), (200, 0, 50)   # colorList's first three
BLACK, WHITE, ROSE = (0, 0, 0), (255, 255, 255), (200, 150, 200)
SLOT_W, SLOT_H, GAP = 360, 240, 12                               # one graph per slot
COLUMNS = 4


def chromium() -> str:
    found = shutil.which('chromium') or shutil.which('chromium-browser')
    if found is None:
        message = 'chromium not found (tools/system-deps.sh installs it)'
        if os.environ.get('CI', '').lower() == 'true':
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return found


def _wave(base_time: int, centre: float, swing: float) -> list[tuple[int, float]]:
    return [(base_time - i * STEP, centre + swing * math.sin(i / 6.0)) for i in range(120)]


@pytest.fixture
def render_server(tmp_path: Any, base_time: int) -> Iterator[str]:
    """``python -m webapp.server`` on a free loopback port over a few series (two hours
    before ``base_time``); yields its base URL."""
    root = str(tmp_path / 'whisper')
    make_whisper(root, 'browser.sine', _wave(base_time, 50, 40))
    for name, centre in (('a', 2.0), ('b', 4.0), ('c', 6.0)):   # averages 1:2:3 for the pie
        make_whisper(root, 'browser.%s' % name, _wave(base_time, centre, 0.5))
    make_whisper(root, 'browser.big', _wave(base_time, 3e6, 1e6))
    # values in the first and last 40 minutes only: a gap over the middle third
    make_whisper(root, 'browser.gappy', [(base_time - i * STEP, 20.0 + (i % 7))
                                         for i in range(120) if not 40 <= i < 80])
    # 10-minute steps between 1 and 9: staircase treads are many pixels long
    make_whisper(root, 'browser.steps', [(base_time - i * 600, float(1 + (i * 5) % 9))
                                         for i in range(13)], archives=[(600, 100)])
    settings = tmp_path / 'local_settings.py'
    settings.write_text('STORAGE_DIR = %r\nCARBONLINK_HOSTS = []\n' % str(tmp_path))
    proc = subprocess.Popen([sys.executable, '-m', 'webapp.server', '--config', str(settings),
                             '--port', '0'], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=str(ROOT), text=True)
    try:
        line = proc.stdout.readline()
        assert 'listening on http://127.0.0.1:' in line, proc.stderr.read()
        yield line.strip().split()[-1].rstrip('/')
    finally:
        stop_server(proc)


class _Page(BaseHTTPRequestHandler):
    html = b''

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(200)
        self.send_header('Content-Type', 'text/html; charset=utf-8')
        self.send_header('Content-Length', str(len(self.html)))
        self.end_headers()
        self.wfile.write(self.html)

    def log_message(self, *args: Any) -> None:
        pass


def screenshot(body: str, size: tuple[int, int], tmp_path: Any) -> Any:
    """Chromium's screenshot (RGB numpy array, rows x columns) of a page with ``body`` on
    a magenta background, served over loopback; one browser launch."""
    from PIL import Image
    np = pytest.importorskip('numpy')
    browser = chromium()
    handler = type('Page', (_Page,), {'html': (
        '<!doctype html><html><head><style>html,body{margin:0;padding:0;background:#ff00ff}'
        'img{display:block}</style></head><body>%s</body></html>' % body).encode()})
    page = ThreadingHTTPServer(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=page.serve_forever, kwargs={'poll_interval': 0.05},
                              daemon=True)
    thread.start()
    shot = tmp_path / 'shot.png'
    try:
        result = subprocess.run([
            browser, '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
            '--no-first-run', '--disable-background-networking', '--disable-component-update',
            '--disable-sync', '--hide-scrollbars', '--force-device-scale-factor=1',
            '--force-color-profile=srgb', '--user-data-dir=%s' % (tmp_path / 'profile'),
            '--screenshot=%s' % shot, '--window-size=%d,%d' % size,
            'http://127.0.0.1:%d/' % page.server_address[1]],
            capture_output=True, text=True, timeout=120)
    finally:
        page.shutdown()
        page.server_close()
        thread.join(5)
    assert shot.exists(), result.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b'\x89PNG\r\n\x1a\n'
    screen = Image.open(io.BytesIO(data)).convert('RGB')
    assert screen.size == size
    return np.asarray(screen).astype(int)


def decode_png(data: bytes) -> Any:
    from PIL import Image
    np = pytest.importorskip('numpy')
    return np.asarray(Image.open(io.BytesIO(data)).convert('RGB')).astype(int)


def test_chromium_displays_the_png_graph(render_server: str, base_time: int,
                                          tmp_path: Any) -> None:
    np = pytest.importorskip('numpy')
    query = urlencode({'target': 'browser.sine', 'format': 'png', 'width': WIDTH,
                       'height': HEIGHT, 'from': base_time - 7200, 'until': base_time,
                       'title': 'sine'})
    image_url = '%s/render?%s' % (render_server, query)
    status, headers, png = http_get(image_url)
    assert status == 200 and headers['Content-Type'] == 'image/png'
    direct = decode_png(png)
    assert direct.shape == (HEIGHT, WIDTH, 3)
    pixels = screenshot('<img src="%s" width="%d" height="%d">' % (
        image_url.replace('&', '&amp;'), WIDTH, HEIGHT), (800, 600), tmp_path)
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 3   # not one colour
    assert tuple(pixels[500, 700]) == MAGENTA        # page background outside the image
    shown = pixels[:HEIGHT, :WIDTH]
    assert not (shown == MAGENTA).all(axis=2).any()  # the image covers its whole box
    close = (np.abs(shown - direct) <= 2).all(axis=2)
    assert close.mean() >= 0.99                      # and it is the server's graph


# --- every graph type in one page ---------------------------------------------------------

def near(pixels: Any, rgb: tuple[int, int, int], tolerance: int = 40) -> Any:
    """Mask of pixels within ``tolerance`` (per channel) of ``rgb``."""
    np = pytest.importorskip('numpy')
    return (np.abs(pixels - np.asarray(rgb)) <= tolerance).all(axis=2)


def plot_box(pixels: Any, fg: tuple[int, int, int] = BLACK) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of the frame drawn in ``fg``: the outermost columns and
    rows that are mostly ``fg``."""
    np = pytest.importorskip('numpy')
    ink = near(pixels, fg, 80)
    cols = np.flatnonzero(ink.sum(axis=0) > 0.5 * pixels.shape[0])
    rows = np.flatnonzero(ink.sum(axis=1) > 0.5 * pixels.shape[1])
    assert len(cols) >= 2 and len(rows) >= 2, 'no frame in %s' % (fg,)
    return int(cols[0]), int(rows[0]), int(cols[-1]), int(rows[-1])


def runs(mask_line: Any) -> list[int]:
    """Lengths of the runs of True in a 1-D mask."""
    lengths, count = [], 0
    for value in list(mask_line) + [False]:
        if value:
            count += 1
        elif count:
            lengths.append(count)
            count = 0
    return lengths


def check_line(img: Any, others: dict) -> None:
    left, top, right, bottom = plot_box(img)
    inside = near(img[top + 2:bottom - 1, left + 2:right - 1], BLUE)
    assert inside.any(axis=0).mean() > 0.95      # the series crosses the whole plot
    # the legend under the plot: the series colour's sample and black text
    assert near(img[bottom + 20:], BLUE).sum() > 10 and near(img[bottom + 20:], BLACK).any()


def check_stacked(img: Any, others: dict) -> None:
    left, top, right, bottom = plot_box(img)
    plot = img[top + 1:bottom, left + 1:right]
    blue, green, red = near(plot, BLUE, 10), near(plot, GREEN, 10), near(plot, RED, 10)
    filled = 0
    for x in range(5, plot.shape[1] - 5, 7):
        ys = {name: plot.shape[0] - 1 - mask[:, x].nonzero()[0]   # height above the bottom
              for name, mask in (('a', blue), ('b', green), ('c', red))}
        assert all(len(v) for v in ys.values()), 'a series missing at column %d' % x
        # a under b under c, from the bottom of the plot up: each band is filled
        assert ys['a'].min() <= 2 and ys['a'].max() < ys['b'].max() < ys['c'].max()
        column = plot[plot.shape[0] - 1 - ys['c'].max():, x]
        background = near(column[:, None], WHITE, 3)[:, 0]
        assert not background.any(), 'white inside the stacked area at column %d' % x
        grid = near(column[:, None], ROSE, 30)[:, 0]    # grid lines are under the areas
        assert not grid.any(), 'a grid line over the stacked area at column %d' % x
        filled += 1
    assert filled > 30


def check_area_first(img: Any, others: dict) -> None:
    left, top, right, bottom = plot_box(img)
    plot = img[top + 1:bottom, left + 1:right]
    area = plot.shape[0] * plot.shape[1]
    assert near(plot, BLUE, 10).sum() > 0.15 * area        # the first series is filled
    assert 0 < near(plot, GREEN, 10).sum() < 0.03 * area    # the second one is a line


def check_area_all(img: Any, others: dict) -> None:
    left, top, right, bottom = plot_box(img)
    plot = img[top + 1:bottom, left + 1:right]
    # c (red, drawn last) fills down to the axis: its colour at the very bottom row
    assert near(plot[-3:], RED, 30).mean() > 0.9
    assert near(plot, RED, 10).sum() > 0.3 * plot.shape[0] * plot.shape[1]


def check_staircase(img: Any, others: dict) -> None:
    left, top, right, bottom = plot_box(img)
    steps = near(img[top + 2:bottom - 1, left + 2:right - 1], BLUE, 60)
    treads = sum(1 for row in steps for n in runs(row) if n >= 15)
    risers = sum(1 for col in steps.T for n in runs(col) if n >= 15)
    assert treads >= 8 and risers >= 8
    assert steps.mean() < 0.05                                # a line, not an area
    slope = others['steps-slope']
    sl, st, sr, sb = plot_box(slope)
    diagonal = near(slope[st + 2:sb - 1, sl + 2:sr - 1], BLUE, 60)
    assert sum(1 for row in diagonal for n in runs(row) if n >= 15) < treads / 4


def check_connected(img: Any, others: dict) -> None:
    for key, expect in (('connected', True), ('gaps-slope', False)):
        shot = img if key == 'connected' else others[key]
        left, top, right, bottom = plot_box(shot)
        middle = (left + right) // 2
        width = (right - left) // 10
        across = near(shot[top + 2:bottom - 1, middle - width:middle + width], BLUE, 60)
        assert across.any(axis=0).all() == expect, key    # the line crosses the gap
        if expect:      # as one straight segment
            np = pytest.importorskip('numpy')
            xs = np.arange(across.shape[1])
            ys = np.array([across[:, x].nonzero()[0].mean() for x in xs])
            fit = np.polyval(np.polyfit(xs, ys, 1), xs)
            assert np.abs(ys - fit).max() <= 1.5, key


def check_second_axis(img: Any, others: dict) -> None:
    left, top, right, bottom = plot_box(img)
    labels = near(img[top:bottom, right + 3:], BLACK, 80)
    assert labels.sum() > 30                                # tick labels right of the plot
    assert near(img[top:bottom, :left - 2], BLACK, 80).sum() > 30
    single = others['line']
    sl, st, sr, sb = plot_box(single)
    assert not near(single[st:sb, sr + 3:], BLACK, 80).any()
    assert near(img[top:bottom, left:right], GREEN, 30).any()   # the right-axis series


def check_pie(img: Any, others: dict) -> None:
    counts = [int(near(img, rgb, 10).sum()) for rgb in (BLUE, GREEN, RED)]
    assert counts[0] > 500
    assert abs(counts[1] / counts[0] - 2) < 0.3 and abs(counts[2] / counts[0] - 3) < 0.45
    dark = near(img, BLACK, 80)
    assert not (dark.sum(axis=0) > 0.5 * img.shape[0]).any()  # no frame: not a line graph
    slices = near(img, BLUE, 10) | near(img, GREEN, 10) | near(img, RED, 10)
    rows, cols = slices.any(axis=1).nonzero()[0], slices.any(axis=0).nonzero()[0]
    assert 0.9 < (cols.max() - cols.min()) / (rows.max() - rows.min()) < 1.1   # round


def check_hide_legend(img: Any, others: dict) -> None:
    left, top, right, bottom = plot_box(img)
    assert not near(img[bottom + 20:], BLUE, 60).any()        # no legend sample


def check_hide_axes(img: Any, others: dict) -> None:
    above_legend = img[:int(img.shape[0] * 0.8)]
    assert not near(above_legend, BLACK, 60).any()           # no frame or tick labels
    assert near(img[int(img.shape[0] * 0.8):], BLACK, 60).any()   # the legend stays
    assert near(img, BLUE, 60).any(axis=0).mean() > 0.8


def check_graph_only(img: Any, others: dict) -> None:
    assert not near(img, BLACK, 60).any()
    series = near(img, BLUE, 60)
    assert series.any(axis=0).mean() > 0.97                  # the plot spans the image
    assert series[:, :3].any() and series[:, -3:].any()


def check_colours(img: Any, others: dict) -> None:
    dark = near(img, (16, 32, 48), 3)
    assert dark.mean() > 0.6                                  # bgcolor
    left, top, right, bottom = plot_box(img, fg=(255, 255, 0))  # fgcolor: frame ...
    assert near(img[bottom + 2:], (255, 255, 0), 60).sum() > 30   # ... and labels
    plot = img[top + 1:bottom, left + 1:right]
    assert near(plot, (255, 128, 0), 40).any() and near(plot, (0, 255, 255), 40).any()
    assert not near(img, BLUE, 40).any()                      # not the default colours


GRAPHS: list[tuple[str, dict, Callable]] = [
    ('line', {'target': 'browser.sine', 'lineWidth': 2}, check_line),
    ('stacked', {'target': ['browser.a', 'browser.b', 'browser.c'], 'areaMode': 'stacked',
                 'hideLegend': 'true'}, check_stacked),
    ('area-first', {'target': ['browser.a', 'browser.c'], 'areaMode': 'first',
                    'hideLegend': 'true', 'yMin': 0}, check_area_first),
    ('area-all', {'target': ['browser.a', 'browser.b', 'browser.c'], 'areaMode': 'all',
                  'hideLegend': 'true'}, check_area_all),
    ('staircase', {'target': 'browser.steps', 'lineMode': 'staircase', 'hideLegend': 'true',
                   'hideGrid': 'true'}, check_staircase),
    ('steps-slope', {'target': 'browser.steps', 'hideLegend': 'true', 'hideGrid': 'true'},
     lambda img, others: None),
    ('connected', {'target': 'browser.gappy', 'lineMode': 'connected', 'hideLegend': 'true',
                   'hideGrid': 'true'}, check_connected),
    ('gaps-slope', {'target': 'browser.gappy', 'hideLegend': 'true', 'hideGrid': 'true'},
     lambda img, others: None),
    ('second-axis', {'target': ['browser.sine', 'secondYAxis(browser.big)'],
                     'hideLegend': 'true', 'lineWidth': 2}, check_second_axis),
    ('pie', {'target': ['browser.a', 'browser.b', 'browser.c'], 'graphType': 'pie',
             'hideLegend': 'true', 'valueLabels': 'none'}, check_pie),
    ('hide-legend', {'target': 'browser.sine', 'hideLegend': 'true'}, check_hide_legend),
    ('hide-axes', {'target': 'browser.sine', 'hideAxes': 'true', 'lineWidth': 2},
     check_hide_axes),
    ('graph-only', {'target': 'browser.sine', 'graphOnly': 'true', 'lineWidth': 2},
     check_graph_only),
    ('colours', {'target': ['browser.a', 'browser.c'], 'bgcolor': '102030',
                 'fgcolor': 'FFFF00', 'colorList': 'FF8000,00FFFF', 'lineWidth': 2},
     check_colours),
]
SVG = ('svg', {'target': ['browser.a', 'browser.c'], 'title': 'svg', 'lineWidth': 2})


def slot(index: int) -> tuple[int, int]:
    """(x, y) of the top-left corner of graph ``index`` on the page."""
    return (GAP + (index % COLUMNS) * (SLOT_W + GAP), GAP + (index // COLUMNS) * (SLOT_H + GAP))


def test_chromium_displays_each_graph_type(render_server: str, base_time: int,
                                            tmp_path: Any) -> None:
    """One page with every graph type (and an SVG) in one Chromium launch: each PNG shows
    pixel for pixel where the page put it and draws what its options ask for."""
    np = pytest.importorskip('numpy')
    window = {'from': base_time - 7200, 'until': base_time, 'width': SLOT_W,
              'height': SLOT_H}
    urls, direct, tags = [], {}, []
    for index, (name, params, _check) in enumerate(GRAPHS + [(SVG[0], SVG[1], None)]):
        query = dict(window, **params, format='svg' if name == 'svg' else 'png')
        url = '%s/render?%s' % (render_server, urlencode(query, doseq=True))
        status, headers, body = http_get(url)
        assert status == 200, body[:300]
        assert headers['Content-Type'] == ('image/svg+xml' if name == 'svg' else 'image/png')
        if name == 'svg':
            assert body.lstrip().startswith(b'<?xml') and b'<svg' in body
            status, _headers, png = http_get(url.replace('format=svg', 'format=png'))
            direct['svg-as-png'] = decode_png(png)
        else:
            direct[name] = decode_png(body)
            assert direct[name].shape == (SLOT_H, SLOT_W, 3)
        x, y = slot(index)
        urls.append(url)
        tags.append('<img src="%s" width="%d" height="%d" style="position:absolute;'
                    'left:%dpx;top:%dpx">' % (url.replace('&', '&amp;'), SLOT_W, SLOT_H, x, y))
    count = len(tags)
    size = (GAP + COLUMNS * (SLOT_W + GAP),
            GAP + math.ceil(count / COLUMNS) * (SLOT_H + GAP) + 40)
    pixels = screenshot(''.join(tags), size, tmp_path)
    assert (pixels[-30:] == MAGENTA).all()                 # the page below every graph
    shown = {}
    for index, (name, _params, _check) in enumerate(GRAPHS + [(SVG[0], SVG[1], None)]):
        x, y = slot(index)
        box = pixels[y:y + SLOT_H, x:x + SLOT_W]
        assert not (box == MAGENTA).all(axis=2).any(), name   # the image covers its box
        assert (pixels[y - GAP // 2, x:x + SLOT_W] == MAGENTA).all(), name  # and no more
        assert (pixels[y:y + SLOT_H, x + SLOT_W + GAP // 2] == MAGENTA).all(), name
        if name != 'svg':
            close = (np.abs(box - direct[name]) <= 2).all(axis=2)
            assert close.mean() >= 0.99, name                 # the server's PNG, in place
        shown[name] = box
    for name, _params, check in GRAPHS:
        try:
            check(shown[name], shown)
        except AssertionError as error:
            from PIL import Image
            Image.fromarray(shown[name].astype('uint8')).save(tmp_path / ('%s.png' % name))
            raise AssertionError('%s (screenshot in %s): %s' % (name, tmp_path, error)) from None
    # the SVG drawn by Chromium: the same graph as the PNG, up to anti-aliasing and fonts
    svg, png = shown['svg'], direct['svg-as-png']
    assert near(svg, WHITE, 3).mean() > 0.5                   # its background, not the page
    left, top, right, bottom = plot_box(png)
    for rgb in (BLUE, GREEN):
        assert near(svg[top + 1:bottom, left + 1:right], rgb, 20).sum() > 100
    # where either image has ink (not the white background), Chromium's drawing of the SVG
    # is within anti-aliasing of Agg's (grid lines 0.6 px wide come out lighter or darker;
    # the same graph 2 px off scores below 0.8)
    ink = ~near(svg, WHITE, 40) | ~near(png, WHITE, 40)
    same = (np.abs(svg - png) <= 128).all(axis=2) & ink
    assert same.sum() / ink.sum() > 0.9
    assert (np.abs(svg - png) <= 64).all(axis=2).mean() > 0.96
