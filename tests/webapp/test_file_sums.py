"""Sums and maxDataPoints buckets computed while reading whisper files (``_points.scan``).

Oracle: the values ``whisper.fetch`` returns, added as graphite-web's safeSum and
consolidation add them (builtin ``sum()`` on the Pythons it runs on: left to right from 0,
``plain_sum``), bit for bit, on every Python; a truncated file and a file
with a bad header among good ones leave the good ones' answers intact.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from typing import Any

import pytest
import whisper
from hypothesis import HealthCheck, given, settings, strategies as st

from carbon.storage.whisper_format import CorruptWhisperFile
from tests.webapp.helpers import aligned_now, call, create_whisper_with, make_whisper
from tests.webapp.json_oracle import plain_sum
from webapp.app import make_app
from webapp import pysum
from webapp.storage import packed, whisper_read

np = pytest.importorskip('numpy')
NOW = 1_700_000_000
value_st = st.one_of(st.floats(allow_nan=False, allow_infinity=True),
                     st.sampled_from([0.1, -0.0, 1e16, 1.0, -1e16, 3.0]),
                     st.integers(-50, 50).map(float))


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) ==
                                                  math.copysign(1, b))


def python_sum(values: list) -> tuple[float, int]:
    present = [v for v in values if v is not None]
    return (float(plain_sum(present)) if present else 0.0), len(present)


def check_means(means: Any, kept: list[list], vpp: int, xff: Any) -> None:
    """Bucket means as graphite-web's average consolidation makes them: sum() / count,
    None (NaN here) without a value or below the xFilesFactor."""
    for r, values in enumerate(kept):
        assert len(means[r]) == -(-len(values) // vpp)
        for b, mean in enumerate(means[r].tolist()):
            total, n = python_sum(values[b * vpp:(b + 1) * vpp])
            wanted = total / n if n and n / vpp >= (xff or 0.0) else math.nan
            assert same(mean, wanted), (r, b, mean, wanted)


def finished(acc: Any, comp: Any) -> list[float]:
    with np.errstate(all='ignore'):
        return pysum.result(np, acc, comp).tolist()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=st.lists(st.lists(st.tuples(st.integers(0, 3000), value_st), max_size=60),
                      min_size=1, max_size=5),
       archives=st.sampled_from([[(10, 300)], [(60, 30), (300, 12)], [(7, 500)]]),
       start=st.integers(-100, 3000), length=st.integers(1, 3000), data=st.data())
def test_sums_and_buckets_match_python(files: list, archives: list, start: int, length: int,
                                       data: Any) -> None:
    tmp = tempfile.mkdtemp()
    try:
        paths = []
        for i, writes in enumerate(files):
            path = os.path.join(tmp, 'm%d.wsp' % i)
            create_whisper_with(path, archives, writes, NOW)   # (age, value) pairs
            paths.append(path)
        from_time = NOW - 3000 + start
        answers = whisper_read.read_many(paths, from_time, from_time + length, NOW)
        rows = [answer[0][1] for answer in answers if answer[0] is not None]
        if not rows:
            return
        assert all(type(r.block) is packed.FileBlock for r in rows)
        expected = [whisper.fetch(p, from_time, from_time + length, now=NOW)[1] for p in paths]
        groups = data.draw(st.integers(1, 3))
        targets = [data.draw(st.integers(0, groups - 1)) for _ in rows]
        acc, comp, count = packed.sum_rows(rows, targets, groups, pysum.COMPENSATED)
        sums = finished(acc, comp)
        for g in range(groups):
            members = [expected[i] for i, t in enumerate(targets) if t == g]
            for k in range(len(expected[0])):
                total, n = python_sum([m[k] for m in members])
                assert count[g][k] == n and same(sums[g][k], total)
        drop, vpp = data.draw(st.integers(0, 3)), data.draw(st.integers(1, 7))
        acc, comp, count = packed.consolidate_rows(rows, drop, vpp, pysum.COMPENSATED)
        buckets = finished(acc, comp)
        for r, values in enumerate(expected):
            kept = values[drop:]
            assert len(buckets[r]) == -(-len(kept) // vpp)
            for b in range(len(buckets[r])):
                total, n = python_sum(kept[b * vpp:(b + 1) * vpp])
                assert count[r][b] == n and same(buckets[r][b], total)
        xff = data.draw(st.sampled_from([None, 0.0, 0.3, 0.5, 1.0]))
        check_means(packed.consolidate_means(rows, drop, vpp, pysum.COMPENSATED, xff),
                    [values[drop:] for values in expected], vpp, xff)
        assert not rows[0].block.loaded          # nothing above read the whole block
        assert [packed.to_list(r) for r in rows] == expected    # each row read alone
        assert packed.stack_rows(rows) is not None and rows[0].block.loaded
        assert [packed.to_list(r) for r in rows] == expected    # from the block's arrays
        assert packed.sum_rows(rows, targets, groups, pysum.COMPENSATED) is None
    finally:
        shutil.rmtree(tmp)


def test_truncated_and_bad_files_among_good_ones(tmp_path: Any, make_web_settings: Any) -> None:
    now = aligned_now(60)
    good = [make_whisper(str(tmp_path), 'grp.good%d' % i, [(now - 60 * k, float(i + k))
                                                            for k in range(1, 6)])
            for i in range(3)]
    short = make_whisper(str(tmp_path), 'grp.short', [(now - 60, 100.0)])
    with open(short, 'r+b') as fh:
        fh.truncate(os.path.getsize(short) - 12)
    with open(str(tmp_path / 'grp' / 'bad.wsp'), 'wb') as fh:
        fh.write(b'\x00\x00\x00\x09' + b'\x00' * 20)
    answers = whisper_read.read_many(good[:2] + [short, str(tmp_path / 'grp' / 'bad.wsp')] +
                                     good[2:], now - 600, now, now)
    assert isinstance(answers[2], CorruptWhisperFile)
    assert isinstance(answers[3], CorruptWhisperFile)
    app = make_app(make_web_settings(WHISPER_DIR=str(tmp_path)))
    try:
        status, _, body = call(app, '/render', {'target': 'sumSeries(grp.*)', 'format': 'json',
                                                'from': now - 600, 'until': now, 'now': now})
    finally:
        app.close()
    assert status == 200
    points = json.loads(body)[0]['datapoints']
    assert [v for v, _ in points if v is not None] == [3 * k + 3.0 for k in range(5, 0, -1)]


def test_file_changed_after_its_header_was_read(tmp_path: Any) -> None:
    """A file cut short between reading its header and its points adds nothing."""
    now = aligned_now(60)
    paths = [make_whisper(str(tmp_path), 'm%d' % i, [(now - 60, float(i + 1))])
             for i in range(2)]
    answers = whisper_read.read_many(paths, now - 600, now, now)
    rows = [answer[0][1] for answer in answers]
    os.truncate(paths[0], 100)
    acc, comp, count = packed.sum_rows(rows, [0, 0], 1, pysum.COMPENSATED)
    assert acc.sum() == 2.0 and count.sum() == 1



def test_ring_of_many_files_with_unreadable_ones(tmp_path: Any) -> None:
    """Sums of many files (one thread loads them into a ring, the other adds them): files
    cut short or removed after their header was read add nothing, the others add in row
    order, for every group."""
    points = 1200
    paths = [str(tmp_path / ('f%02d.wsp' % i)) for i in range(40)]
    for i, path in enumerate(paths):
        write_dense(path, points, i)
    from_time = NOW - points
    expected = [whisper.fetch(p, from_time, NOW, now=NOW)[1] for p in paths]
    rows = [answer[0][1] for answer in whisper_read.read_many(paths, from_time, NOW, NOW)]
    for gone in (3, 17, 39):
        if gone == 17:
            os.remove(paths[gone])
        else:
            os.truncate(paths[gone], 100)
        expected[gone] = [None] * points
    targets = [i % 3 for i in range(len(rows))]
    acc, comp, count = packed.sum_rows(rows, targets, 3, pysum.COMPENSATED)
    sums = finished(acc, comp)
    for g in range(3):
        for k in range(points):
            total, n = python_sum([expected[i][k] for i in range(len(rows)) if i % 3 == g])
            assert count[g][k] == n and same(sums[g][k], total)


def write_dense(path: str, points: int, seed: int) -> None:
    """A one-archive (1 s x ``points``) whisper file with nearly every slot written, slot 0
    holding a recent point so a full-range read wraps around the archive's end; about
    one slot in ten is stale (an old timestamp: no value for fetch)."""
    import struct
    rng = np.random.default_rng(seed)
    first = NOW - 1000
    stamps = first + np.arange(points, dtype=np.int64)
    stamps[stamps > NOW] -= points
    stale = rng.random(points) < 0.1
    stamps[stale] -= 10 * points
    records = np.empty(points, np.dtype([('t', '>u4'), ('v', '>f8')]))
    records['t'] = stamps
    records['v'] = rng.normal(size=points) * 1e6
    with open(path, 'wb') as fh:
        fh.write(struct.pack('!2LfL', 1, points, 0.5, 1) + struct.pack('!3L', 28, 1, points))
        fh.write(records.tobytes())


def test_large_scans_shared_by_two_threads(tmp_path: Any) -> None:
    """Scans of a million records or more run on two threads (sums split by columns,
    buckets and rows split by files): the same answers as one value list per file."""
    points = 1 << 18
    paths = [str(tmp_path / ('big%d.wsp' % i)) for i in range(5)]
    for i, path in enumerate(paths):
        write_dense(path, points, i)
    from_time = NOW - points          # the whole archive: 5 x 2 ** 18 records
    answers = whisper_read.read_many(paths, from_time, NOW, NOW)
    rows = [answer[0][1] for answer in answers]
    expected = [whisper.fetch(p, from_time, NOW, now=NOW)[1] for p in paths]
    groups = ((0, 2, 3, 4), (1,))
    assert len(expected[0]) == points
    acc, comp, count = packed.sum_rows(rows, [0, 1, 0, 0, 0], 2, pysum.COMPENSATED)
    sums = finished(acc, comp)
    for g, members in enumerate(groups):
        for k in range(len(expected[0])):
            total, n = python_sum([expected[m][k] for m in members])
            assert count[g][k] == n and same(sums[g][k], total)
    acc, comp, count = packed.consolidate_rows(rows, 1, 1000, pysum.COMPENSATED)
    buckets = finished(acc, comp)
    for r, values in enumerate(expected):
        for b in range(len(buckets[r])):
            total, n = python_sum(values[1 + b * 1000:1 + (b + 1) * 1000])
            assert count[r][b] == n and same(buckets[r][b], total)
    check_means(packed.consolidate_means(rows, 1, 1000, pysum.COMPENSATED, 0.5),
                [values[1:] for values in expected], 1000, 0.5)
    assert [packed.to_list(r) for r in rows] == expected


def test_many_headers_read_by_two_threads(tmp_path: Any) -> None:
    """read_heads over 512 files or more runs on two threads: every file's own header,
    size and error."""
    now = aligned_now(60)
    paths = [make_whisper(str(tmp_path), 'm%d' % i, [(now - 60, float(i))],
                          archives=[(60, 10 + i % 3)]) for i in range(600)]
    paths[7] = str(tmp_path / 'missing.wsp')
    sizes = np.zeros(len(paths), dtype=np.int64)
    heads = whisper_read._points.read_heads([p.encode() for p in paths], 512, sizes)
    for i, (path, head) in enumerate(zip(paths, heads, strict=True)):
        if i == 7:
            assert head == 2 and sizes[i] == 0      # ENOENT
            continue
        with open(path, 'rb') as fh:
            assert head == fh.read(28)
        assert sizes[i] == os.path.getsize(path)
    answers = whisper_read.read_many(paths, now - 600, now, now)
    assert [packed.to_list(a[0][1])[-2] for i, a in enumerate(answers) if i != 7] == \
        [float(i) for i in range(600) if i != 7]


def test_one_row_read_alone(tmp_path: Any) -> None:
    """A series turned into a list (a cache merge, a generic function) reads its own
    file only: the other files of its block stay unread."""
    now = aligned_now(60)
    paths = [make_whisper(str(tmp_path), 'm%d' % i, [(now - 60 * k, float(i * k))
                                                      for k in range(1, 4)]) for i in range(3)]
    answers = whisper_read.read_many(paths, now - 600, now, now)
    rows = [answer[0][1] for answer in answers]
    assert packed.to_list(rows[1]) == whisper.fetch(paths[1], now - 600, now, now=now)[1]
    assert not rows[0].block.loaded
    assert packed.sum_rows(rows, [0, 0, 0], 1, pysum.COMPENSATED)[0].sum() == 18.0
