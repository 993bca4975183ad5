"""The C reader's batches of 16 or more paths are opened relative to their shared
directory: the same kinds, headers and sizes as path by path, whatever the names."""

from __future__ import annotations

import os
import stat
from typing import Any

import pytest

_points = pytest.importorskip('webapp.storage._points')
np = pytest.importorskip('numpy')


def expected_kind(path: bytes) -> int:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return 0
    link = 4 if stat.S_ISLNK(mode) else 0
    if link:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return link
    return link | (1 if stat.S_ISDIR(mode) else 2 if stat.S_ISREG(mode) else 0)


def test_kinds_and_heads_of_a_shared_directory(tmp_path: Any, monkeypatch: Any) -> None:
    top = tmp_path / 'top'
    for i in range(20):
        (top / ('d%02d' % i)).mkdir(parents=True)
        (top / ('d%02d' % i) / 'f.wsp').write_bytes(bytes([i + 1]) * (1 + i % 15))  # no header
    (top / 'link.wsp').symlink_to(top / 'd03' / 'f.wsp')
    (top / 'dangling').symlink_to(top / 'nowhere')
    (top / 'dirlink').symlink_to(top / 'd04')
    base = os.fsencode(top) + b'/'
    names = [base + b'd%02d/f.wsp' % i for i in range(20)] + [
        base + b'link.wsp', base + b'dangling', base + b'dirlink', base + b'missing.wsp',
        base + b'd05', base, base + b'd06/', base + b'dirlink/f.wsp']
    kinds = _points.path_kinds(names)
    assert list(kinds) == [expected_kind(n) for n in names]
    sizes = np.zeros(len(names), dtype=np.int64)
    heads = _points.read_heads(names, 64, sizes)
    for name, head, size in zip(names, heads, sizes.tolist(), strict=True):
        if expected_kind(name) & 2:
            with open(name, 'rb') as fh:
                assert head == fh.read(64) and size == os.path.getsize(name)
        else:
            assert type(head) is int and head > 0     # an errno: missing, or a directory
    # relative names share a relative directory too
    monkeypatch.chdir(tmp_path)
    relative = [b'top/d%02d/f.wsp' % i for i in range(20)]
    assert list(_points.path_kinds(relative)) == [2] * 20
