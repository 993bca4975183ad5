"""Fixtures for the whisper backend tests: a backend on a fresh directory under tmp_path."""

from __future__ import annotations

from typing import Callable

import pytest

from carbon.config.settings import Settings
from carbon.storage.whisper_backend import WhisperDatabase


@pytest.fixture
def make_db(tmp_path) -> Callable[..., WhisperDatabase]:
    """``make_db(**settings)``: a WhisperDatabase on tmp_path/"data", closed at teardown."""
    made: list[WhisperDatabase] = []

    def make(**overrides) -> WhisperDatabase:
        overrides.setdefault("LOCAL_DATA_DIR", str(tmp_path / "data"))
        db = WhisperDatabase.from_settings(Settings(**overrides))
        made.append(db)
        return db

    yield make
    for db in made:
        db.close()
