"""A real headless Chromium shows a PNG graph served by the graphite-render process.

The page (from a tiny loopback server) embeds ``<img src="http://127.0.0.1:<render
port>/render?...&format=png">`` on a magenta background; the screenshot must show the
graph exactly where the page put it, pixel for pixel the PNG the server returns.
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
from typing import Any, Iterator
from urllib.parse import urlencode

import pytest

from tests.webapp.helpers import STEP, http_get, make_whisper, stop_server

ROOT = Path(__file__).resolve().parents[2]
WIDTH, HEIGHT = 600, 400
MAGENTA = (255, 0, 255)


def chromium() -> str:
    found = shutil.which('chromium') or shutil.which('chromium-browser')
    if found is None:
        message = 'chromium not found (tools/system-deps.sh installs it)'
        if os.environ.get('CI', '').lower() == 'true':
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return found


@pytest.fixture
def render_server(tmp_path: Any, base_time: int) -> Iterator[str]:
    """``python -m webapp.server`` on a free loopback port; yields its base URL."""
    points = [(base_time - i * STEP, 50 + 40 * math.sin(i / 6.0)) for i in range(120)]
    make_whisper(str(tmp_path / 'whisper'), 'browser.sine', points)
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


def test_chromium_displays_the_png_graph(render_server: str, base_time: int,
                                          tmp_path: Any) -> None:
    from PIL import Image
    browser = chromium()
    query = urlencode({'target': 'browser.sine', 'format': 'png', 'width': WIDTH,
                       'height': HEIGHT, 'from': base_time - 7200, 'until': base_time,
                       'title': 'sine'})
    image_url = '%s/render?%s' % (render_server, query)
    status, headers, png = http_get(image_url)
    assert status == 200 and headers['Content-Type'] == 'image/png'
    direct = Image.open(io.BytesIO(png)).convert('RGB')
    assert direct.size == (WIDTH, HEIGHT)

    handler = type('Page', (_Page,), {'html': (
        '<!doctype html><html><head><style>html,body{margin:0;padding:0;background:#ff00ff}'
        'img{display:block}</style></head><body><img src="%s" width="%d" height="%d">'
        '</body></html>' % (image_url.replace('&', '&amp;'), WIDTH, HEIGHT)).encode()})
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
            '--screenshot=%s' % shot, '--window-size=800,600',
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
    assert screen.size == (800, 600)
    np = pytest.importorskip('numpy')
    pixels = np.asarray(screen).astype(int)
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 3   # not one colour
    assert tuple(pixels[500, 700]) == MAGENTA        # page background outside the image
    shown = pixels[:HEIGHT, :WIDTH]
    assert not (shown == MAGENTA).all(axis=2).any()  # the image covers its whole box
    close = (np.abs(shown - np.asarray(direct).astype(int)) <= 2).all(axis=2)
    assert close.mean() >= 0.99                      # and it is the server's graph
