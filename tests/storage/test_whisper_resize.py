"""carbon.storage.whisper_resize against the real whisper 1.1.10 tools: the rewrite is
byte-identical to whisper-resize.py's output (its clock pinned to the same ``now``), the
header edit to whisper-set-aggregation-method.py's."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest
import whisper

from carbon.storage.whisper_resize import (
    HEADER, REWRITE, UNCHANGED, Target, compare, read_header, replace, rewrite, set_metadata,
    temp_path,
)

NOW = 1_700_000_123
BIN = os.path.dirname(sys.executable)

# Runs a whisper 1.1.10 script with time.time() pinned (argv: now, script, args...).
PINNED = (
    "import runpy, sys, time\n"
    "now = float(sys.argv[1])\n"
    "time.time = lambda: now\n"
    "sys.argv = sys.argv[2:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def run_pinned(script: str, *args: str) -> None:
    path = os.path.join(BIN, script)
    assert os.path.exists(path), "whisper 1.1.10 installs %s beside the interpreter" % script
    done = subprocess.run([sys.executable, "-c", PINNED, str(NOW), path, *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def make_file(path: str, archives: list[tuple[int, int]], method: str, xff: float,
              seed: int) -> None:
    """A file with points over its whole retention: gaps, runs, some old writes."""
    rng = random.Random(seed)
    whisper.create(path, archives, xFilesFactor=xff, aggregationMethod=method)
    longest = max(s * p for s, p in archives)
    step = archives[0][0]
    # written in a few batches as time passes, like a cache would
    for batch_now in range(NOW - longest, NOW + 1, max(step, longest // 7)):
        points = []
        for t in range(batch_now - longest // 7, batch_now + 1, step):
            if rng.random() < 0.8:
                points.append((t, rng.choice([rng.uniform(-100, 100), float(rng.randint(0, 9))])))
        whisper.update_many(path, points, now=batch_now)
    whisper.update_many(path, [(NOW - i * step, float(i)) for i in range(20)], now=NOW)


CASES = [
    # (old archives, new archives, old method, new method, old xff, new xff)
    ([(10, 360)], [(10, 360), (60, 1440)], "average", "average", 0.5, 0.5),
    ([(10, 360)], [(10, 360), (60, 1440)], "sum", "sum", 0.0, 0.0),
    ([(60, 1440), (3600, 24 * 30)], [(10, 2160), (60, 10080)], "max", "max", 0.5, 0.5),
    ([(1, 300), (10, 200), (60, 100)], [(5, 120), (30, 200)], "min", "last", 0.5, 0.2),
    ([(10, 500), (60, 300)], [(10, 100)], "last", "average", 0.5, 1.0),
    ([(5, 200), (20, 200)], [(5, 400), (20, 400), (100, 200)], "avg_zero", "sum", 0.3, 0.7),
    ([(60, 100)], [(30, 400), (120, 300)], "average", "max", 0.5, 0.0),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_rewrite_is_whisper_resize_bytes(tmp_path, case: int) -> None:
    old, new, method, new_method, xff, new_xff = CASES[case]
    path = str(tmp_path / "m.wsp")
    make_file(path, old, method, xff, seed=case)
    theirs = str(tmp_path / "theirs.wsp")
    run_pinned("whisper-resize.py", path, *("%d:%d" % a for a in new),
               "--newfile", theirs, "--xFilesFactor", str(new_xff),
               "--aggregationMethod", new_method)
    before = open(path, "rb").read()
    change = compare(read_header(path), Target(new, new_xff, new_method))
    assert change.kind == REWRITE
    temp = rewrite(path, change, NOW)
    assert temp == temp_path(path)
    assert open(path, "rb").read() == before  # the old file is only read
    ours = open(temp, "rb").read()
    expected = open(theirs, "rb").read()
    assert len(ours) == len(expected)
    assert ours == expected
    # not trivially equal: the new file holds data
    assert any(v is not None for v in whisper.fetch(temp, NOW - 300, NOW, now=NOW)[1])
    replace(temp, path)
    assert open(path, "rb").read() == expected
    assert not os.path.exists(temp)


@pytest.mark.parametrize("method,xff", [("sum", None), ("max", 0.1), ("last", 1.0),
                                        ("min", 0.0), ("average", 0.5)])
def test_header_edit_is_whisper_set_aggregation_method_bytes(tmp_path, method, xff) -> None:
    archives = [(10, 360), (60, 1440)]
    path = str(tmp_path / "m.wsp")
    make_file(path, archives, "average", 0.5, seed=7)
    theirs = str(tmp_path / "theirs.wsp")
    with open(path, "rb") as src, open(theirs, "wb") as dst:
        dst.write(src.read())
    run_pinned("whisper-set-aggregation-method.py", theirs, method,
               *([] if xff is None else [str(xff)]))
    change = compare(read_header(path), Target(archives, xff, method))
    if method == "average" and xff == 0.5:
        assert change.kind == UNCHANGED
    else:
        assert change.kind == HEADER
        set_metadata(path, change)
    assert open(path, "rb").read() == open(theirs, "rb").read()
    assert compare(read_header(path), Target(archives, xff, method)).kind == UNCHANGED


def test_compare_defaults_and_refusals(tmp_path) -> None:
    path = str(tmp_path / "m.wsp")
    whisper.create(path, [(60, 60)])  # whisper's defaults: 0.5, average
    assert compare(read_header(path), Target([(60, 60)], None, None)).kind == UNCHANGED
    assert compare(read_header(path), Target([(60, 61)], None, None)).kind == REWRITE
    with pytest.raises(ValueError):
        compare(read_header(path), Target([(60, 60), (60, 120)], None, None))


def test_leftover_temp_is_replaced(tmp_path) -> None:
    path = str(tmp_path / "m.wsp")
    make_file(path, [(10, 100)], "average", 0.5, seed=3)
    with open(temp_path(path), "wb") as handle:
        handle.write(b"torn")
    change = compare(read_header(path), Target([(10, 200)], 0.5, "average"))
    temp = rewrite(path, change, NOW)
    assert os.path.getsize(temp) == change.new_size


def test_full_archive_is_whisper_resize_bytes(tmp_path) -> None:
    """Every slot of the old archive holds its interval's point (the fast read path)."""
    path = str(tmp_path / "full.wsp")
    whisper.create(path, [(10, 360)], xFilesFactor=0.5, aggregationMethod="average")
    whisper.update_many(path, [(NOW - 10 * k, float(k % 7)) for k in range(360)], now=NOW)
    theirs = str(tmp_path / "theirs.wsp")
    run_pinned("whisper-resize.py", path, "10:360", "60:1440", "--newfile", theirs)
    change = compare(read_header(path), Target([(10, 360), (60, 1440)], 0.5, "average"))
    assert open(rewrite(path, change, NOW), "rb").read() == open(theirs, "rb").read()
