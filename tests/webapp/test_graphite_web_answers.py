"""Our answers against graphite-web 1.1.10's, recorded over the same fixed whisper tree
(tests/webapp/reference_answers.py records them; tests/data/graphite-web-answers.json)."""

from __future__ import annotations

import base64
import json
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
