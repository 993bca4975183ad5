"""The finder's level-at-a-time walk (C directory listing) against its per-directory walk.

Random trees of directories, ``.wsp``/``.wsp.gz``/other files, hidden entries and
symlinks (to directories, to files, dangling), random patterns of globs, character
classes and braces: both walks must yield the same paths, kinds and symlink flags in
the same order, and give up at the same FIND_MAX_ENTRIES.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webapp.storage import whisper_finder
from webapp.storage.store import FindLimitError
from webapp.storage.whisper_finder import WhisperFinder

NAMES = ['a', 'b', 'ab', 'ba', '.h', 'a.b', 'x1']
ENTRY = st.tuples(st.sampled_from(NAMES),
                  st.sampled_from(['dir', 'wsp', 'wsp.gz', 'txt', 'link-dir', 'link-file',
                                   'dangling']))
PART = st.one_of(st.sampled_from(['*', '*', '{a,b}', 'a*']),
                st.sampled_from(['*', '?', 'a*', '*b', '[ab]', '[!a]*', '{a,b}', '{a*,b}',
                                 '{a,ab}', 'a', 'ab', 'x1', 'zz', '?b', '.h', '*.b', '{b,a}']))


def build(root: str, spec: list, depth: int = 0) -> None:
    """Directories (with their own random entries one level down) and files."""
    for i, (name, kind) in enumerate(spec):
        path = os.path.join(root, name)
        if os.path.lexists(path) and (kind != 'dir' or not os.path.isdir(path) or
                                      os.path.islink(path)):
            continue
        if kind == 'dir':
            os.makedirs(path, exist_ok=True)
            if depth < 2:
                build(path, spec[i + 1:i + 5], depth + 1)
        elif kind in ('wsp', 'wsp.gz', 'txt'):
            if not os.path.lexists(path + '.' + kind):
                with open(path + '.' + kind, 'wb') as fh:
                    fh.write(b'x')
        elif kind == 'link-dir':
            os.symlink(root, path)
        elif kind == 'link-file':
            target = os.path.join(root, 'target-file')
            if not os.path.exists(target):
                with open(target, 'wb') as fh:
                    fh.write(b'x')
            if not os.path.lexists(path + '.wsp'):
                os.symlink(target, path + '.wsp')
        else:
            os.symlink(os.path.join(root, 'missing'), path)


def walk(finder: WhisperFinder, parts: list[str], leaves_only: bool, levels: bool) -> Any:
    seen = [0]
    try:
        if levels:
            return list(finder._find_levels(parts, leaves_only, seen))
        return list(finder._find_paths(finder.root, parts, 0, leaves_only, seen))
    except FindLimitError as err:
        return str(err)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.lists(ENTRY, min_size=1, max_size=14),
       parts=st.lists(PART, min_size=1, max_size=3), leaves_only=st.booleans(),
       limit=st.sampled_from([float('inf'), 3, 12]))
def test_level_walk_matches_directory_walk(spec: list, parts: list[str], leaves_only: bool,
                                           limit: float) -> None:
    assert whisper_finder._points is not None, 'the C accelerator is built'
    root = tempfile.mkdtemp()
    try:
        build(root, spec)
        finder = WhisperFinder(root, max_entries=limit)
        expected = walk(finder, parts, leaves_only, levels=False)
        assert walk(finder, parts, leaves_only, levels=True) == expected
        pattern = '.'.join(parts)
        assert nodes(finder, pattern, leaves_only, True) == \
            nodes(finder, pattern, leaves_only, False)
    finally:
        shutil.rmtree(root)


def nodes(finder: WhisperFinder, pattern: str, leaves_only: bool, levels: bool) -> Any:
    """find_nodes' (path, is_leaf, file, metric name) list, with or without the C walk."""
    accelerator = whisper_finder._points
    if not levels:
        whisper_finder._points = None
    try:
        return [(n.path, n.is_leaf, getattr(n, 'fs_path', None), getattr(n, 'real_path', None))
                for n in finder.find_nodes(pattern, leaves_only)]
    except FindLimitError as err:
        return str(err)
    finally:
        whisper_finder._points = accelerator


def test_unlistable_directory_is_skipped(tmp_path: Any) -> None:
    (tmp_path / 'a' / 'b').mkdir(parents=True)
    (tmp_path / 'a' / 'b' / 'm.wsp').write_bytes(b'x')
    (tmp_path / 'c').write_bytes(b'not a directory')
    finder = WhisperFinder(str(tmp_path))
    assert walk(finder, ['*', '*', 'm'], True, levels=True) == [('a/b/m.wsp', False, False)]
    assert whisper_finder._points.list_dirs([str(tmp_path / 'c').encode()]) == [None]


def test_many_files_looked_at_by_two_threads(tmp_path: Any) -> None:
    """Batches of 512 paths or more are looked at on two threads: same answers."""
    for i in range(700):
        leaf = tmp_path / ('g%d' % (i % 7)) / ('h%03d' % i)
        leaf.mkdir(parents=True)
        if i % 5:
            (leaf / ('value.wsp' if i % 3 else 'value.wsp.gz')).write_bytes(b'x')
        elif i % 10 == 0:
            (leaf / 'value').mkdir()
    finder = WhisperFinder(str(tmp_path))
    for leaves_only in (True, False):
        expected = walk(finder, ['*', '*', 'value'], leaves_only, levels=False)
        assert len(expected) == 560 + (0 if leaves_only else 70)
        assert walk(finder, ['*', '*', 'value'], leaves_only, levels=True) == expected


def test_empty_parts_take_the_directory_walk(tmp_path: Any) -> None:
    (tmp_path / 'a' / 'b').mkdir(parents=True)
    (tmp_path / 'a' / 'b' / 'm.wsp').write_bytes(b'x')
    finder = WhisperFinder(str(tmp_path))
    for pattern in ('a..b.m', 'a.*..m', '.a.b.m', 'a.b.m.'):
        assert nodes(finder, pattern, False, True) == nodes(finder, pattern, False, False)
