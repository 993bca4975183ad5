"""Batch creation (carbon.storage.whisper_create): the C accelerator and the pure-Python
loop make files byte-identical to whisper.create and report errors file by file."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
import tempfile

import pytest
import whisper
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbon.config.settings import Settings
from carbon.storage import whisper_create
from carbon.storage.whisper_backend import WhisperDatabase
from carbon.storage.whisper_create import (
    CreateOptions, NewFile, create_many, exists_many, file_plan,
)
from carbon.storage.whisper_format import InvalidConfiguration

from .test_whisper_identity import METHODS, schemas

NATIVE = [True, False] if whisper_create.native is not None else [False]
if os.environ.get("CARBON_REQUIRE_NATIVE"):
    assert whisper_create.native is not None, "carbon.storage._whisper_create was not built"

VARIANTS = {
    "default": (CreateOptions(), {}),
    "sparse": (CreateOptions(sparse=True), {"sparse": True}),
    "fallocate": (CreateOptions(use_fallocate=True), {"useFallocate": True}),
    "locked": (CreateOptions(lock=True, fadvise_random=True, autoflush=True), {}),
}


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _close_all(results: list) -> None:
    for result in results:
        if isinstance(result, NewFile):
            os.close(result.fd)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(archives=schemas(), method=st.sampled_from(METHODS),
       xff=st.sampled_from([0.0, 0.5, 1.0]) | st.floats(0, 1),
       variant=st.sampled_from(sorted(VARIANTS)), native=st.sampled_from(NATIVE))
def test_batch_files_equal_whisper_create(tmp_path, archives, method, xff, variant,
                                          native) -> None:
    options, whisper_options = VARIANTS[variant]
    with tempfile.TemporaryDirectory(dir=tmp_path) as root:
        reference = os.path.join(root, "reference.wsp")
        whisper.create(reference, list(archives), xff, method, **whisper_options)
        header, total = file_plan(archives, xff, method)
        paths = [os.path.join(root, "new", "d%d" % i, "m.wsp") for i in range(3)]
        results = create_many([(path, header, total) for path in paths], options,
                              use_native=native)
        try:
            for path, result in zip(paths, results, strict=True):
                assert isinstance(result, NewFile)
                st_ = os.fstat(result.fd)
                assert os.stat(path).st_ino == st_.st_ino  # the descriptor is of the path
                assert _read(path) == _read(reference)
                # the descriptor is open read-write at the new file
                os.pwrite(result.fd, b"\x00", total - 1)
        finally:
            _close_all(results)


@pytest.mark.parametrize("native", NATIVE)
def test_errors_are_reported_per_file(tmp_path, native: bool) -> None:
    header, total = file_plan([(60, 100)], 0.5, "average")
    (tmp_path / "exists.wsp").write_bytes(b"x")
    (tmp_path / "plainfile").write_bytes(b"x")
    paths = [
        str(tmp_path / "ok1.wsp"),
        str(tmp_path / "exists.wsp"),  # already there
        str(tmp_path / "plainfile" / "m.wsp"),  # a file where a directory should be
        str(tmp_path / ("n" * 300 + ".wsp")),  # name too long
        str(tmp_path / "made" / "on" / "demand" / "ok2.wsp"),
    ]
    results = create_many([(path, header, total) for path in paths], CreateOptions(),
                          use_native=native)
    try:
        assert isinstance(results[0], NewFile) and isinstance(results[4], NewFile)
        assert isinstance(results[1], InvalidConfiguration)
        assert str(results[1]) == "File %s already exists!" % paths[1]
        assert isinstance(results[2], OSError) and results[2].errno == errno.ENOTDIR
        assert isinstance(results[3], OSError) and results[3].errno == errno.ENAMETOOLONG
        assert (tmp_path / "exists.wsp").read_bytes() == b"x"  # left alone
        for good in (paths[0], paths[4]):
            assert len(_read(good)) == total and _read(good)[:len(header)] == header
    finally:
        _close_all(results)


@pytest.mark.parametrize("native", NATIVE)
def test_missing_directory_without_makedirs(tmp_path, native: bool) -> None:
    header, total = file_plan([(60, 10)], None, None)
    path = str(tmp_path / "absent" / "m.wsp")
    [result] = create_many([(path, header, total)], CreateOptions(), makedirs=False,
                           use_native=native)
    assert isinstance(result, FileNotFoundError)
    assert not os.path.exists(os.path.dirname(path))


FAILING_WRITE = r"""
import json, os, resource, signal, sys
sys.path.insert(0, sys.argv[1])
from carbon.storage.whisper_create import CreateOptions, NewFile, create_many, file_plan
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
small, big = file_plan([(60, 10)], 0.5, "sum"), file_plan([(1, 100000)], 0.5, "sum")
resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
root = sys.argv[2]
items = [(os.path.join(root, name + ".wsp"), *plan)
         for name, plan in (("a", small), ("big", big), ("c", small))]
out = []
for fill in ("default", "sparse", "fallocate"):
    options = CreateOptions(sparse=fill == "sparse", use_fallocate=fill == "fallocate")
    results = create_many([(path.replace(".wsp", fill + ".wsp"), header, total)
                           for path, header, total in items], options,
                          use_native=sys.argv[3] == "1")
    out.append([r.errno if isinstance(r, OSError) else "ok" for r in results])
    for r in results:
        if isinstance(r, NewFile):
            os.close(r.fd)
print(json.dumps(out))
"""


@pytest.mark.parametrize("native", NATIVE)
def test_a_file_failing_half_way_is_removed_and_others_are_kept(tmp_path,
                                                                native: bool) -> None:
    """RLIMIT_FSIZE makes filling the big file fail (EFBIG) after it was opened."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", FAILING_WRITE, root, str(tmp_path),
                           "1" if native else "0"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    for row in json.loads(done.stdout):
        assert row == ["ok", errno.EFBIG, "ok"]
    names = sorted(os.listdir(tmp_path))
    assert names == sorted("%s%s.wsp" % (name, fill) for name in "ac"
                           for fill in ("default", "sparse", "fallocate"))


@pytest.mark.parametrize("native", NATIVE)
def test_umask_applies(tmp_path, native: bool) -> None:
    header, total = file_plan([(60, 10)], None, None)
    old = os.umask(0o027)
    try:
        results = create_many([(str(tmp_path / "sub" / "m.wsp"), header, total)],
                              CreateOptions(), use_native=native)
    finally:
        os.umask(old)
    _close_all(results)
    assert stat.S_IMODE(os.stat(tmp_path / "sub" / "m.wsp").st_mode) == 0o640
    assert stat.S_IMODE(os.stat(tmp_path / "sub").st_mode) == 0o750


@pytest.mark.parametrize("native", NATIVE)
def test_exists_many_is_os_path_exists(tmp_path, native: bool) -> None:
    (tmp_path / "f").write_bytes(b"")
    (tmp_path / "d").mkdir()
    paths = [str(tmp_path / name) for name in ("f", "d", "missing", "f/below", "x" * 300)]
    assert exists_many(paths, use_native=native) == [os.path.exists(p) for p in paths]


@pytest.mark.skipif(whisper_create.native is None, reason="accelerator not built")
def test_accelerator_refuses_bad_arguments_without_crashing(tmp_path, monkeypatch) -> None:
    native = whisper_create.native
    monkeypatch.chdir(tmp_path)  # a relative path that slipped through would land here
    good = (str(tmp_path / "a.wsp"), b"h" * 28, 100)
    for items, error in (
            ([(17, b"h", 10)], TypeError),
            ([("p", "not bytes", 10)], TypeError),
            ([("p", b"h")], TypeError),
            (["p"], TypeError),
            ([good, ("p\0q", b"h", 10)], ValueError),
            ([good, (b"p\0q", b"h", 10)], ValueError),
            ([("p", b"hhhh", 2)], ValueError),
            ([("p", b"", 0)], ValueError),
            ([("", b"h", 10)], ValueError),
            ([("p", b"h", "10")], TypeError),
            (None, TypeError)):
        with pytest.raises(error):
            native.create_files(items, 0, False, False, False, True)
    with pytest.raises(ValueError):
        native.create_files([], 3, False, False, False, True)
    assert os.listdir(tmp_path) == []  # nothing is created by a refused call
    assert native.create_files([], 0, False, False, False, True) == []
    with pytest.raises(TypeError):
        native.stat_files([b"ok", 3])
    with pytest.raises(ValueError):
        native.stat_files(["a\0b"])
    assert native.stat_files((str(tmp_path), os.fsencode(str(tmp_path)), tmp_path)) == [0] * 3


@pytest.mark.parametrize("native", NATIVE)
def test_a_nul_byte_fails_only_its_own_file(tmp_path, native: bool) -> None:
    header, total = file_plan([(60, 10)], None, None)
    paths = [str(tmp_path / "a.wsp"), str(tmp_path / "b\0.wsp"), str(tmp_path / "c.wsp")]
    results = create_many([(path, header, total) for path in paths], CreateOptions(),
                          use_native=native)
    _close_all(results)
    assert isinstance(results[0], NewFile) and isinstance(results[2], NewFile)
    assert isinstance(results[1], ValueError)
    assert exists_many(paths, use_native=native) == [True, False, True]


@pytest.mark.parametrize("native", NATIVE)
def test_backend_create_many_keeps_descriptors_for_the_first_write(tmp_path,
                                                                   native: bool) -> None:
    db = WhisperDatabase.from_settings(Settings(LOCAL_DATA_DIR=str(tmp_path / "data"),
                                  WHISPER_FD_CACHE_SIZE=2))
    db.native_create = native
    try:
        names = ["a.b.m%d" % i for i in range(5)]
        requests = [(name, [(60, 100), (600, 20)], 0.5, "sum") for name in names]
        requests.append(("bad.schema", [(60, 10), (60, 20)], 0.5, "sum"))
        requests.append(("a.b.m0", [(60, 100), (600, 20)], 0.5, "sum"))  # a second time
        errors = db.create_many(requests)
        assert errors[:5] == [None] * 5
        assert isinstance(errors[5], InvalidConfiguration)
        assert isinstance(errors[6], InvalidConfiguration)
        assert db.exists_many(names + ["bad.schema"]) == [True] * 5 + [False]
        reference = str(tmp_path / "ref.wsp")
        whisper.create(reference, [(60, 100), (600, 20)], 0.5, "sum")
        now = 1_700_000_000
        whisper.update_many(reference, [(now - 60, 1.0)], now=now)
        for name in names:
            db.write(name, [(now - 60, 1.0)], now=now)
            assert _read(db.get_filesystem_path(name)) == _read(reference)
    finally:
        db.close()
    assert _open_under(str(tmp_path)) == 0  # nothing kept open after close()


def _open_under(root: str) -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink("/proc/self/fd/" + fd).startswith(root)
        except OSError:
            pass
    return count


@pytest.mark.parametrize("native", NATIVE)
def test_default_fill_reserves_every_block_small_or_large(tmp_path, native: bool) -> None:
    """whisper's default fill writes a body up to SMALL_BODY as zeroes and fallocates a
    larger one: either way every byte is zero and every block is reserved (not sparse),
    as whisper's written zeroes are."""
    plans = {"small": file_plan([(60, 360)], None, None),  # 4,348 bytes: written zeroes
             "large": file_plan([(10, 8640)], None, None)}  # 103,708 bytes: fallocated
    assert plans["small"][1] - len(plans["small"][0]) <= whisper_create.SMALL_BODY
    assert plans["large"][1] - len(plans["large"][0]) > whisper_create.SMALL_BODY
    items = [(str(tmp_path / (name + ".wsp")), *plan) for name, plan in plans.items()]
    results = create_many(items, CreateOptions(), use_native=native)
    _close_all(results)
    for (path, header, total), result in zip(items, results, strict=True):
        assert isinstance(result, NewFile)
        data = _read(path)
        assert data == header + bytes(total - len(header))
        assert os.stat(path).st_blocks * 512 >= total


@pytest.mark.parametrize("native", NATIVE)
def test_bodies_either_side_of_the_small_body_limit_equal_whisper_create(
        tmp_path, native: bool) -> None:
    """A body of at most SMALL_BODY bytes is written with its header in one write, a
    larger one fallocated: both give whisper.create's bytes and reserve every block."""
    largest_small = whisper_create.SMALL_BODY // 12  # points: 16,380 bytes of body
    for points in (1, largest_small, largest_small + 1):
        archives = [(60, points)]
        reference = str(tmp_path / ("reference%d.wsp" % points))
        whisper.create(reference, archives, 0.5, "average")
        header, total = file_plan(archives, None, None)
        path = str(tmp_path / ("made%d" % points) / "m.wsp")
        result = create_many([(path, header, total)], CreateOptions(), use_native=native)[0]
        assert isinstance(result, NewFile)
        os.close(result.fd)
        assert _read(path) == _read(reference)
        assert os.stat(path).st_blocks * 512 >= total
