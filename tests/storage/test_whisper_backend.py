"""WhisperDatabase: paths, metadata, descriptor cache, external changes and options."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import threading

import pytest
import whisper

from carbon.plugins import STORAGE_BACKENDS
from carbon.storage.whisper_backend import WhisperDatabase
from carbon.storage.whisper_format import CorruptWhisperFile, InvalidAggregationMethod

NOW = 1_700_000_000
ARCHIVES = [(60, 120), (300, 100), (3600, 50)]


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _points(start: int, count: int, step: int = 60) -> list[tuple[int, float]]:
    return [(start - k * step, float(k)) for k in range(count)]


def test_registered_as_whisper_backend() -> None:
    assert STORAGE_BACKENDS.get("whisper") is WhisperDatabase


def test_filesystem_paths(make_db, tmp_path) -> None:
    data = str(tmp_path / "data")
    db = make_db()
    assert db.get_filesystem_path("a.b.c") == os.path.join(data, "a", "b", "c.wsp")
    digest = hashlib.sha256(b"a.b;x=1").hexdigest()
    assert db.get_filesystem_path("a.b;x=1") == os.path.join(
        data, "_tagged", digest[:3], digest[3:6], digest + ".wsp")
    readable = make_db(TAG_HASH_FILENAMES=False)
    assert readable.get_filesystem_path("a.b;x=1") == os.path.join(
        data, "_tagged", digest[:3], digest[3:6], "a_DOT_b;x=1.wsp")


def test_exists_create_write_tagged(make_db) -> None:
    db = make_db()
    name = "cpu.load;host=a.example;dc=x"
    assert not db.exists(name)
    db.create(name, ARCHIVES, 0.5, "average")
    assert db.exists(name)
    db.write(name, [(NOW - 60, 3.0)], now=NOW)
    assert whisper.fetch(db.get_filesystem_path(name), NOW - 120, NOW, now=NOW)[1][0] == 3.0


def test_exists_moves_readable_tagged_file_to_hashed_name(make_db) -> None:
    name = "m.n;k=v"
    readable = make_db(TAG_HASH_FILENAMES=False)
    readable.create(name, ARCHIVES, 0.5, "sum")
    old_path = readable.get_filesystem_path(name)
    hashed = make_db()
    assert hashed.exists(name)
    assert not os.path.exists(old_path)
    assert whisper.info(hashed.get_filesystem_path(name))["aggregationMethod"] == "sum"


def test_create_rejects_existing_and_invalid(make_db) -> None:
    db = make_db()
    db.create("a.b", ARCHIVES, 0.5, "average")
    with pytest.raises(ValueError, match="already exists"):
        db.create("a.b", ARCHIVES, 0.5, "average")
    with pytest.raises(ValueError):
        db.create("a.c", [(60, 10), (60, 20)], 0.5, "average")
    with pytest.raises(ValueError):
        db.create("a.d", ARCHIVES, 0.5, "median")
    assert not os.path.exists(db.get_filesystem_path("a.d"))
    with pytest.raises(ValueError):
        db.validate_archive_list([(60, 10), (90, 100)])
    db.validate_archive_list([(60, 10), (120, 100)])


def test_metadata_get_set(make_db, tmp_path) -> None:
    db = make_db()
    db.create("a.b", ARCHIVES, 0.25, "average")
    reference = str(tmp_path / "ref.wsp")
    shutil.copy(db.get_filesystem_path("a.b"), reference)
    assert db.get_metadata("a.b", "aggregationMethod") == "average"
    assert db.set_metadata("a.b", "aggregationMethod", "max") == "average"
    assert whisper.setAggregationMethod(reference, "max") == "average"
    assert _read(db.get_filesystem_path("a.b")) == _read(reference)
    assert db.get_metadata("a.b", "aggregationMethod") == "max"
    with pytest.raises(ValueError, match="Unsupported metadata key"):
        db.get_metadata("a.b", "xFilesFactor")
    with pytest.raises(ValueError, match="Unsupported metadata key"):
        db.set_metadata("a.b", "retention", 1)
    with pytest.raises(InvalidAggregationMethod):
        db.set_metadata("a.b", "aggregationMethod", "median")
    assert _read(db.get_filesystem_path("a.b")) == _read(reference)
    with pytest.raises(FileNotFoundError):
        db.get_metadata("no.such", "aggregationMethod")


def test_write_after_metadata_change_propagates_with_new_method(make_db, tmp_path) -> None:
    db = make_db()
    db.create("m", ARCHIVES, 0.0, "average")
    reference = str(tmp_path / "ref.wsp")
    whisper.create(reference, list(ARCHIVES), 0.0, "average")
    for method in ("average", "max", "sum"):
        db.set_metadata("m", "aggregationMethod", method)
        whisper.setAggregationMethod(reference, method)
        batch = [(t, v * (1 + len(method))) for t, v in _points(NOW, 30)]
        db.write("m", batch, now=NOW)
        whisper.update_many(reference, batch, now=NOW)
        assert _read(db.get_filesystem_path("m")) == _read(reference)


def _open_descriptors_under(directory: str) -> int:
    count = 0
    for entry in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + entry).startswith(directory):
                count += 1
        except OSError:
            pass
    return count


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_descriptor_cache_is_bounded(make_db, tmp_path) -> None:
    db = make_db(WHISPER_FD_CACHE_SIZE=4)
    data = str(tmp_path / "data")
    for i in range(12):
        name = "m%d.x" % i
        db.create(name, ARCHIVES, 0.5, "average")
        db.write(name, _points(NOW, 5), now=NOW)
        assert db.open_files <= 4
        assert _open_descriptors_under(data) <= 4
    for i in range(12):  # every metric still readable and written correctly
        assert whisper.fetch(db.get_filesystem_path("m%d.x" % i), NOW - 120, NOW,
                             now=NOW)[1][0] == 1.0
    db.close()
    assert db.open_files == 0 and _open_descriptors_under(data) == 0


def test_file_replaced_externally_is_reopened(make_db, tmp_path) -> None:
    """whisper-resize style: a new file renamed over the path between writes."""
    db = make_db()
    db.create("r", ARCHIVES, 0.5, "average")
    path = db.get_filesystem_path("r")
    db.write("r", _points(NOW, 10), now=NOW)
    assert db.open_files == 1
    replacement = str(tmp_path / "new.wsp")
    whisper.create(replacement, [(10, 600), (600, 100)], 0.0, "last")
    reference = str(tmp_path / "ref.wsp")
    shutil.copy(replacement, reference)
    os.rename(replacement, path)
    batch = _points(NOW + 30, 20, step=10)
    db.write("r", batch, now=NOW + 30)
    whisper.update_many(reference, batch, now=NOW + 30)
    assert _read(path) == _read(reference)


def test_file_deleted_externally_raises_then_recreates(make_db) -> None:
    db = make_db()
    db.create("d", ARCHIVES, 0.5, "average")
    db.write("d", _points(NOW, 3), now=NOW)
    os.unlink(db.get_filesystem_path("d"))
    assert not db.exists("d")
    assert db.open_files == 1
    with pytest.raises(FileNotFoundError):
        db.write("d", _points(NOW, 3), now=NOW)
    assert db.open_files == 0  # the deleted file's descriptor is let go
    db.create("d", ARCHIVES, 0.5, "average")
    db.write("d", _points(NOW, 3), now=NOW)
    assert whisper.fetch(db.get_filesystem_path("d"), NOW - 120, NOW, now=NOW)[1][0] == 1.0


def test_header_rewritten_in_place_is_seen(make_db, tmp_path) -> None:
    """Same inode and size, new header bytes (e.g. whisper-set-xfilesfactor)."""
    db = make_db()
    db.create("x", ARCHIVES, 1.0, "average")
    reference = str(tmp_path / "ref.wsp")
    whisper.create(reference, list(ARCHIVES), 1.0, "average")
    sparse = [(t, v) for t, v in _points(NOW, 40) if t % 180]
    db.write("x", sparse[:10], now=NOW)
    whisper.update_many(reference, sparse[:10], now=NOW)
    whisper.setXFilesFactor(db.get_filesystem_path("x"), 0.0)
    whisper.setXFilesFactor(reference, 0.0)
    db.write("x", sparse[10:], now=NOW)
    whisper.update_many(reference, sparse[10:], now=NOW)
    assert _read(db.get_filesystem_path("x")) == _read(reference)


def test_corrupt_header_raises(make_db) -> None:
    db = make_db()
    db.create("c", ARCHIVES, 0.5, "average")
    path = db.get_filesystem_path("c")
    with open(path, "r+b") as fh:
        fh.write(b"\x00\x00\x00\x63")  # aggregation type 99
    with pytest.raises(CorruptWhisperFile):
        db.write("c", _points(NOW, 3), now=NOW)


def test_points_outside_retention_are_counted(make_db) -> None:
    db = make_db()
    db.create("old", [(60, 10)], 0.5, "average")
    points = [(NOW - 60, 1.0), (NOW - 601, 2.0), (NOW - 5000, 3.0), (NOW + 60, 4.0)]
    assert db.write("old", points, now=NOW) == 2
    assert db.write("old", [], now=NOW) == 0
    with pytest.raises(ValueError):
        db.write("old", [(2 ** 33, 1.0)], now=2 ** 33)


def test_options_keep_bytes_and_leave_whisper_globals_alone(make_db, tmp_path) -> None:
    db = make_db(WHISPER_AUTOFLUSH=True, WHISPER_LOCK_WRITES=True, WHISPER_FADVISE_RANDOM=True,
                 WHISPER_SPARSE_CREATE=True)
    assert (whisper.LOCK, whisper.AUTOFLUSH, whisper.FADVISE_RANDOM) == (False, False, False)
    db.create("o", ARCHIVES, 0.5, "min")
    reference = str(tmp_path / "ref.wsp")
    whisper.create(reference, list(ARCHIVES), 0.5, "min")
    for k in range(3):
        batch = _points(NOW + 600 * k, 25)
        db.write("o", batch, now=NOW + 600 * k)
        whisper.update_many(reference, batch, now=NOW + 600 * k)
    db.set_metadata("o", "aggregationMethod", "absmax")
    whisper.setAggregationMethod(reference, "absmax")
    assert _read(db.get_filesystem_path("o")) == _read(reference)


def test_lock_writes_waits_for_other_lock_holder(make_db) -> None:
    db = make_db(WHISPER_LOCK_WRITES=True)
    db.create("l", ARCHIVES, 0.5, "average")
    path = db.get_filesystem_path("l")
    with open(path, "rb") as other:
        fcntl.flock(other.fileno(), fcntl.LOCK_EX)
        done = threading.Event()
        writer = threading.Thread(
            target=lambda: (db.write("l", _points(NOW, 3), now=NOW), done.set()))
        writer.start()
        assert not done.wait(0.3), "write did not wait for the lock"
        fcntl.flock(other.fileno(), fcntl.LOCK_UN)
        assert done.wait(10)
        writer.join()
        # and our lock is released after the write
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_files_sharing_a_schema_keep_their_own_header(make_db, tmp_path) -> None:
    """Parsed headers are shared between files with identical header bytes; changing one
    file's header must not affect the other."""
    db = make_db()
    refs = {name: str(tmp_path / (name + ".ref")) for name in ("s1", "s2")}
    for name, ref in refs.items():
        db.create(name, ARCHIVES, 0.0, "average")
        whisper.create(ref, list(ARCHIVES), 0.0, "average")
    for k, method in enumerate(("sum", "min")):
        whisper.setAggregationMethod(db.get_filesystem_path("s1"), method)
        whisper.setAggregationMethod(refs["s1"], method)
        for name, ref in refs.items():
            batch = dict((t, v + k) for t, v in _points(NOW + 900 * k, 20)).items()
            assert db.write(name, batch, now=NOW + 900 * k) == 0  # dict items, as carbon
            whisper.update_many(ref, list(batch), now=NOW + 900 * k)
    for name, ref in refs.items():
        assert _read(db.get_filesystem_path(name)) == _read(ref)
    assert db.get_metadata("s2", "aggregationMethod") == "average"


def test_create_after_its_directory_was_removed(tmp_path):
    import shutil

    from carbon.config.settings import Settings
    from carbon.storage.whisper_backend import WhisperDatabase

    db = WhisperDatabase.from_settings(Settings(LOCAL_DATA_DIR=str(tmp_path)))
    db.create("gone.dir.a", [(60, 10)], None, None)
    shutil.rmtree(tmp_path / "gone")
    db.create("gone.dir.b", [(60, 10)], None, None)  # the cached directory is made again
    db.write("gone.dir.b", [(600.0, 1.0)], now=660)
    assert db.exists("gone.dir.b") and not db.exists("gone.dir.a")
