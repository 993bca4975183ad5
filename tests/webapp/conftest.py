"""Fixtures for the render app tests."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from tests.webapp.helpers import STEP, aligned_now, make_whisper
from webapp.app import GraphiteApp, make_app
from webapp.settings import WebSettings, make_settings


@pytest.fixture
def base_time() -> int:
    """An hour boundary at least 2 hours in the past (points are written before it)."""
    return aligned_now() - 3600


@pytest.fixture
def whisper_tree(tmp_path: Any, base_time: int) -> str:
    """servers.{web1,web2,db1}.{cpu,mem} and a few odd names; value = minute index."""
    root = str(tmp_path / 'whisper')
    for host_i, host in enumerate(['web1', 'web2', 'db1']):
        for metric_i, metric in enumerate(['cpu', 'mem']):
            points = [(base_time - i * STEP, float(host_i * 100 + metric_i * 10 + (i % 10)))
                      for i in range(60)]
            make_whisper(root, 'servers.%s.%s' % (host, metric), points)
    make_whisper(root, 'gaps.a', [(base_time - i * STEP, 1.0) for i in range(0, 60, 2)])
    make_whisper(root, 'gaps.b', [(base_time - i * STEP, 2.0) for i in range(1, 60, 2)])
    return root


@pytest.fixture
def make_web_settings(tmp_path: Any) -> Callable[..., WebSettings]:
    def build(**overrides: Any) -> WebSettings:
        values: dict[str, Any] = dict(STORAGE_DIR=str(tmp_path), CARBONLINK_HOSTS=[],
                                      FIND_TIMEOUT=3.0, FETCH_TIMEOUT=3.0)
        values.update(overrides)
        return make_settings(**values)
    return build


@pytest.fixture
def app(whisper_tree: str, make_web_settings: Callable[..., WebSettings]) -> Iterator[GraphiteApp]:
    application = make_app(make_web_settings(WHISPER_DIR=whisper_tree))
    yield application
    application.close()
