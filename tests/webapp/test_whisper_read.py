"""The fast whisper reader returns exactly what whisper.fetch returns."""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile

import pytest
import whisper
from hypothesis import given, settings, strategies as st

from carbon.storage.whisper_format import InvalidTimeInterval
from tests.webapp.helpers import create_whisper_with
from webapp.storage import whisper_read

NOW = 1_700_000_000


@settings(max_examples=60, deadline=None)
@given(archives=st.sampled_from([[(1, 50)], [(10, 30)], [(60, 20), (300, 12)],
                                 [(7, 13), (21, 9), (63, 5)]]),
       writes=st.lists(st.tuples(st.integers(0, 4000), st.floats(-1e6, 1e6)), max_size=40),
       start=st.integers(-200, 4500), length=st.integers(0, 4500),
       now_shift=st.integers(-100, 100))
def test_same_as_whisper_fetch(archives: list, writes: list, start: int, length: int,
                               now_shift: int) -> None:
    tmp = tempfile.mkdtemp()
    try:
        path = os.path.join(tmp, 'm.wsp')
        create_whisper_with(path, archives, writes, NOW)
        now = NOW + now_shift
        from_time = NOW - 4000 + start
        until_time = from_time + length
        expected = whisper.fetch(path, from_time, until_time, now=now)
        got, header = whisper_read.fetch(path, from_time, until_time, now=now)
        assert got == expected
        assert header['archives'] == whisper.info(path)['archives']
        gz = path + '.gz'
        with open(path, 'rb') as src, gzip.open(gz, 'wb') as dst:
            dst.write(src.read())
        with gzip.open(gz, 'rb') as fh:
            assert whisper_read.file_fetch(fh, from_time, until_time, now)[0] == expected
        assert whisper_read.read_info(path) == whisper_read.read_info(gz) == whisper.info(path)
    finally:
        shutil.rmtree(tmp)


def test_invalid_interval_raises_like_whisper(tmp_path: object) -> None:
    path = str(tmp_path / 'x.wsp')
    whisper.create(path, [(60, 10)])
    with pytest.raises(whisper.InvalidTimeInterval) as reference:
        whisper.fetch(path, NOW, NOW - 10, now=NOW)
    with pytest.raises(InvalidTimeInterval) as ours:
        whisper_read.fetch(path, NOW, NOW - 10, now=NOW)
    assert str(ours.value) == str(reference.value)
