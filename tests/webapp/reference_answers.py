"""Answers of graphite-web 1.1.10 recorded over a fixed whisper tree, for fidelity tests.

The tree has fixed timestamps (hourly points kept ten years), so the answers recorded once
stay valid; ``python -m tests.webapp.reference_answers`` re-records them by running
graphite-web 1.1.10 itself (Django's test client, in bench/common.py's venv) and writes
tests/data/graphite-web-answers.json. The same file holds the body graphite-web 1.1.10 POSTs
to ``/render/local/`` of a rendering host (REMOTE_RENDERING), caught by a sink server.
"""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import whisper

ROOT = Path(__file__).resolve().parent.parent.parent
ANSWERS = ROOT / 'tests' / 'data' / 'graphite-web-answers.json'
END = 1_750_000_000 // 3600 * 3600          # 2025-06-15 15:00 UTC
STEP = 3600
RETENTION = [(STEP, 24 * 366 * 10)]          # hourly for ten years: END stays covered
WINDOW = {'from': str(END - 2 * 86400), 'until': str(END)}

# (label, query) pairs asked of both servers; json answers are compared as parsed floats,
# msgpack and pickle bodies are compared decoded
REQUESTS: list[tuple[str, dict[str, str]]] = [
    ('countSeries nothing', {'target': 'countSeries(nothing.*)'}),
    ('countSeries nothing and something', {'target': 'countSeries(nothing.*, hw.a)'}),
    ('countSeries no args', {'target': 'countSeries()'}),
    ('holtWintersForecast', {'target': 'holtWintersForecast(hw.a)'}),
    ('holtWintersForecast of scale', {'target': 'holtWintersForecast(scale(hw.*, 2))'}),
    ('holtWintersConfidenceBands', {'target': 'holtWintersConfidenceBands(hw.a)'}),
    ('holtWintersConfidenceBands of alias',
     {'target': 'holtWintersConfidenceBands(aliasByNode(hw.b, 1), 2)'}),
    ('holtWintersConfidenceArea', {'target': 'holtWintersConfidenceArea(hw.a)'}),
    ('holtWintersAberration', {'target': 'holtWintersAberration(hw.a)'}),
    ('removeAbovePercentile', {'target': 'removeAbovePercentile(hw.*, 50)'}),
    ('removeBelowPercentile', {'target': 'removeBelowPercentile(hw.*, 50)'}),
    ('removeAbovePercentile of scale', {'target': 'removeAbovePercentile(scale(hw.a, 3), 75)'}),
    ('removeBelowPercentile of offset',
     {'target': 'removeBelowPercentile(offset(hw.b, 1), 25.5)'}),
]
for _label, _query in list(REQUESTS):
    _query.update(WINDOW, format='json')
MSGPACK_REQUESTS: list[tuple[str, dict[str, str]]] = [
    ('msgpack plain', dict(WINDOW, target='hw.*', format='msgpack')),
    ('msgpack function', dict(WINDOW, target='sumSeries(hw.*)', format='msgpack')),
    ('msgpack nothing', dict(WINDOW, target='nothing.*', format='msgpack')),
    ('msgpack local', dict(WINDOW, target='hw.b', format='msgpack', local='1')),
    ('msgpack integers', dict(WINDOW, target='countSeries(hw.*)', format='msgpack')),
]
LOCAL_RENDER_QUERY = dict(WINDOW, target=['hw.a', 'scale(hw.b, 2)'], width='400',
                          height='300', title='delegated')


def series_values(name: str) -> list[tuple[int, float]]:
    """Twelve days of full-precision pseudo-random hourly values with a few gaps."""
    rng = random.Random(name)
    points = []
    for i in range(12 * 24):
        if rng.random() < 0.05:
            continue
        daily = 50.0 + 30.0 * ((i % 24) / 24.0)
        points.append((END - i * STEP, daily + rng.random() * 20.0))
    return points


def build_tree(whisper_dir: str) -> None:
    """hw.a and hw.b under ``whisper_dir``."""
    for name in ('hw.a', 'hw.b'):
        path = os.path.join(whisper_dir, *name.split('.')) + '.wsp'
        os.makedirs(os.path.dirname(path), exist_ok=True)
        whisper.create(path, RETENTION, xFilesFactor=0.5, aggregationMethod='average')
        whisper.update_many(path, series_values(name))


RECORD_SCRIPT = r"""
import base64, http.server, json, sys, threading
payload = json.load(sys.stdin)
bodies = []

class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        bodies.append(self.rfile.read(int(self.headers['Content-Length'])))
        png = base64.b64decode(payload['png'])
        self.send_response(200)
        self.send_header('Content-Type', 'image/png')
        self.send_header('Content-Length', str(len(png)))
        self.end_headers()
        self.wfile.write(png)
    def log_message(self, *args):
        pass

sink = http.server.HTTPServer(('127.0.0.1', 0), Sink)
threading.Thread(target=sink.serve_forever, daemon=True).start()
from django.conf import settings
import django
django.setup()
settings.RENDERING_HOSTS = ['127.0.0.1:%d' % sink.server_address[1]]
from django.test import Client
client = Client()
out = {}
for label, query in payload['requests']:
    resp = client.get('/render/', query)
    out[label] = {'status': resp.status_code, 'content_type': resp['Content-Type'],
                  'body': base64.b64encode(resp.content).decode()}
settings.REMOTE_RENDERING = True
resp = client.get('/render/', payload['local_render'])
out['render local body'] = {'status': resp.status_code,
                            'body': base64.b64encode(bodies[-1]).decode()}
sink.shutdown()
print(json.dumps(out))
"""


def record() -> dict[str, Any]:
    """Run graphite-web 1.1.10 over a fresh tree; the answers as stored in ANSWERS."""
    sys.path.insert(0, str(ROOT / 'bench'))
    from common import graphite_web_venv
    from tests.interop.reference import graphite_web_settings
    venv = graphite_web_venv()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = graphite_web_settings(folder)
        build_tree(str(folder / 'storage' / 'whisper'))
        subprocess.run([str(venv / 'bin' / 'django-admin'), 'migrate', '-v', '0',
                        '--run-syncdb'], env=env, cwd=str(folder), check=True)
        png = base64.b64encode(b'\x89PNG\r\n\x1a\n').decode()
        done = subprocess.run(
            [str(venv / 'bin' / 'python'), '-c', RECORD_SCRIPT], env=env, cwd=str(folder),
            input=json.dumps({'requests': REQUESTS + MSGPACK_REQUESTS, 'png': png,
                              'local_render': LOCAL_RENDER_QUERY}),
            capture_output=True, text=True, timeout=300, check=False)
        if done.returncode:
            raise SystemExit(done.stderr[-3000:])
        return json.loads(done.stdout)


def load_answers() -> dict[str, Any]:
    return json.loads(ANSWERS.read_text())


if __name__ == '__main__':
    answers = record()
    ANSWERS.write_text(json.dumps(answers, indent=1, sort_keys=True) + '\n')
    print('wrote %d answers to %s' % (len(answers), ANSWERS))
