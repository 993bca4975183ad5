"""The descriptor cache's policy, and the backend under concurrent use."""

from __future__ import annotations

import os
import threading
import time

import pytest
import whisper

from carbon.storage.fdcache import FdCache, effective_capacity

NOW = 1_700_000_000


def _files(tmp_path, count: int) -> list[str]:
    paths = []
    for i in range(count):
        path = str(tmp_path / ("f%d.wsp" % i))
        whisper.create(path, [(60, 10)])
        paths.append(path)
    return paths


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_full_cache_keeps_busy_descriptors_and_uses_transient_ones(tmp_path) -> None:
    paths = _files(tmp_path, 5)
    cache = FdCache(3, idle_seconds=1000)
    kept = []
    for path in paths[:3]:
        handle = cache.get(path)
        assert handle.cached
        cache.release(handle)
        kept.append(handle.fd)
    for path in paths[3:]:
        handle = cache.get(path)
        assert not handle.cached and path not in cache
        cache.release(handle)
        assert not _is_open(handle.fd)
    assert len(cache) == 3
    again = cache.get(paths[0])
    assert again.cached and again.fd == kept[0]
    cache.close()
    assert not any(_is_open(fd) for fd in kept)


def test_idle_descriptors_are_replaced_and_closed(tmp_path) -> None:
    paths = _files(tmp_path, 4)
    cache = FdCache(2, idle_seconds=0.05)
    first = cache.get(paths[0])
    cache.get(paths[1])
    time.sleep(0.1)
    third = cache.get(paths[2])  # the least recently used one is idle: replaced
    assert third.cached and paths[0] not in cache and not _is_open(first.fd)
    time.sleep(0.1)
    cache.get(paths[2])  # a hit closes the idle least recently used one
    assert paths[1] not in cache and len(cache) == 1
    cache.close()


def test_replaced_file_is_reopened(tmp_path) -> None:
    paths = _files(tmp_path, 2)
    cache = FdCache(4)
    before = cache.get(paths[0])
    os.rename(paths[1], paths[0])
    after = cache.get(paths[0])
    assert after.ino == os.stat(paths[0]).st_ino != before.ino
    assert not _is_open(before.fd) or before.fd == after.fd
    cache.close()


def test_effective_capacity_is_bounded_by_open_file_limit() -> None:
    import resource
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert effective_capacity(10 ** 9) <= max(1, soft // 2)
    assert effective_capacity(0) == 1
    assert effective_capacity(3) == min(3, max(1, soft // 2))


def test_concurrent_writes_and_metadata(make_db) -> None:
    """The writer thread and the reactor (metadata) share one backend safely."""
    db = make_db(WHISPER_FD_CACHE_SIZE=2)
    names = ["c%d" % i for i in range(4)]
    for name in names:
        db.create(name, [(60, 100), (300, 100)], 0.0, "average")
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for k in range(150):
                for name in names:
                    db.write(name, [(NOW - 60 * (k % 90), float(k))], now=NOW)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reactor() -> None:
        try:
            for k in range(150):
                name = names[k % len(names)]
                db.set_metadata(name, "aggregationMethod", ("max", "average")[k % 2])
                assert db.get_metadata(name, "aggregationMethod") in ("max", "average")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer), threading.Thread(target=reactor)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert db.open_files <= 2
    for name in names:
        info = whisper.info(db.get_filesystem_path(name))
        assert info["aggregationMethod"] in ("max", "average")
        values = whisper.fetch(db.get_filesystem_path(name), NOW - 3000, NOW, now=NOW)[1]
        assert any(v is not None for v in values)


@pytest.mark.parametrize("archives", [
    [], [(60, 10), (60, 20)], [(60, 10), (90, 100)], [(60, 10), (120, 5)],
    [(60, 100), (600, 5)],
])
def test_archive_list_errors_match_whisper(archives) -> None:
    from carbon.storage.whisper_format import InvalidConfiguration, validate_archive_list
    with pytest.raises(whisper.InvalidConfiguration) as theirs:
        whisper.validateArchiveList(list(archives))
    with pytest.raises(InvalidConfiguration) as ours:
        validate_archive_list(archives)
    assert str(ours.value) == str(theirs.value)
