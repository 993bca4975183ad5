"""Our answers against graphite-web 1.1.10's, recorded over the same fixed whisper tree
(tests/webapp/reference_answers.py records them; tests/data/graphite-web-answers.json)."""

from __future__ import annotations

import base64
import io
import json
import pickle
from typing import Any, Iterator

import pytest

from tests.webapp.helpers import call
from tests.webapp.reference_answers import (MSGPACK_REQUESTS, REQUESTS, build_tree,
                                            load_answers)
from webapp.app import GraphiteApp, make_app
from webapp.settings import make_settings

ANSWERS = load_answers()


@pytest.fixture(scope='module')
def reference_app(tmp_path_factory: Any) -> Iterator[GraphiteApp]:
    root = tmp_path_factory.mktemp('reference-tree')
    build_tree(str(root / 'whisper'))
    application = make_app(make_settings(STORAGE_DIR=str(root), WHISPER_DIR=str(root / 'whisper'),
                                         CARBONLINK_HOSTS=[]))
    yield application
    application.close()


def _recorded(label: str) -> tuple[int, bytes]:
    answer = ANSWERS[label]
    return answer['status'], base64.b64decode(answer['body'])


@pytest.mark.parametrize('label,query', REQUESTS, ids=[label for label, _ in REQUESTS])
def test_json_answer_as_graphite_web(reference_app: GraphiteApp, label: str,
                                     query: dict) -> None:
    status, body = _recorded(label)
    got_status, _headers, got = call(reference_app, '/render', query)
    assert got_status == status, got[:300]
    theirs, ours = json.loads(body), json.loads(got)
    assert [s['target'] for s in ours] == [s['target'] for s in theirs]
    assert [s['tags'] for s in ours] == [s['tags'] for s in theirs]
    # the same floats (json.loads of both texts), points and timestamps
    assert [s['datapoints'] for s in ours] == [s['datapoints'] for s in theirs]


@pytest.mark.parametrize('label,query', MSGPACK_REQUESTS,
                         ids=[label for label, _ in MSGPACK_REQUESTS])
def test_msgpack_answer_byte_for_byte(reference_app: GraphiteApp, label: str,
                                      query: dict) -> None:
    status, body = _recorded(label)
    got_status, headers, got = call(reference_app, '/render', query)
    assert got_status == status
    assert headers['Content-Type'] == ANSWERS[label]['content_type']
    assert got == body


def _png_size(body: bytes) -> tuple[int, int]:
    assert body[:8] == b'\x89PNG\r\n\x1a\n', body[:40]
    return int.from_bytes(body[16:20], 'big'), int.from_bytes(body[20:24], 'big')


def test_render_local_draws_what_graphite_web_delegates(reference_app: GraphiteApp) -> None:
    """The body graphite-web 1.1.10 (REMOTE_RENDERING) POSTs to a rendering host, drawn."""
    from PIL import Image
    body = base64.b64decode(ANSWERS['render local body']['body'])
    status, headers, got = call(reference_app, '/render/local/', method='POST', body=body,
                                content_type='')
    assert status == 200, got[:300]
    assert headers['Content-Type'] == 'image/png'
    assert 'no-cache' in headers.get('Cache-Control', '') or 'max-age=0' in \
        headers.get('Cache-Control', '')
    assert _png_size(got) == (400, 300)   # the front end's width and height
    image = Image.open(io.BytesIO(got)).convert('RGB')
    colors = {rgb for _count, rgb in image.getcolors(maxcolors=1 << 20)}
    # both series drawn in the default colour list's first two colours (blue, green)
    assert (100, 100, 255) in colors
    assert (0, 200, 0) in colors


BAD_BODIES = [
    b'line\n' + pickle.dumps({'data': [], 'width': 100}),
    b'bar\n' + pickle.dumps({'data': []}),
    b'line\nnot a pickle',
    b'line\n' + pickle.dumps({'data': [], 'x': print}),   # a global outside the allowlist
]


@pytest.mark.parametrize('body', BAD_BODIES, ids=['empty data', 'unknown type', 'garbage',
                                                  'unsafe global'])
def test_render_local_bad_bodies(reference_app: GraphiteApp, body: bytes) -> None:
    status, headers, got = call(reference_app, '/render/local', method='POST', body=body,
                                content_type='')
    if body == BAD_BODIES[0]:   # no series: graphite-web draws "No Data" too
        assert status == 200 and _png_size(got) == (100, 250)
    else:
        assert status == 500
        assert b'Delegated rendering failed' in got
