"""The local finder: whisper files under WHISPER_DIR, merged with carbon-cache points.

Glob semantics follow graphite-web's StandardFinder: each dotted element is matched
against directory entries with fnmatch after brace expansion (``*``, ``?``,
``[a-z]``, ``[!a]``, ``{a,b}``; ``**`` matches any depth), directories are branches,
``.wsp``/``.wsp.gz`` files are leaves, hidden entries are skipped. Tagged names
(``a.b;k=v``) are looked up at carbon's ``_tagged/`` encoded paths.
"""

from __future__ import annotations

import gzip
import logging
import os
import stat
import time
from concurrent.futures import Future
from os.path import isdir, isfile, join
from typing import Any, Iterator, Optional

from carbon import tags as carbon_tags
from webapp.storage import whisper_read
from webapp.storage.carbonlink import CarbonLinkPool, merge_with_cache
from webapp.storage.nodes import Node, expand_braces, match_entries
from webapp.storage.packed import to_list
from webapp.storage.store import FindLimitError

try:  # pragma: no cover - the optional C accelerator (setup.py NATIVE)
    from webapp.storage import _points
except ImportError:  # pragma: no cover
    _points = None

IS_DIR, IS_FILE, IS_LINK = 1, 2, 4      # _points.list_dirs / path_kinds flags

log = logging.getLogger("webapp.storage")


class WhisperLeaf(Node):
    """A leaf backed by a whisper file; ``real_path`` is the metric name carbon caches under."""

    __slots__ = ('fs_path', 'real_path')

    def __init__(self, path: str, fs_path: str, real_path: str) -> None:
        super().__init__(path, True, True, fetcher=self._file_intervals)
        self.fs_path = fs_path
        self.real_path = real_path

    def info(self) -> dict:
        return whisper_read.read_info(self.fs_path)

    def _file_intervals(self) -> list[tuple[float, float]]:
        try:
            start = time.time() - self.info()['maxRetention']
            end = max(os.stat(self.fs_path).st_mtime, start)
        except (OSError, whisper_read.WhisperError) as err:
            log.warning("cannot read header of %s: %s", self.fs_path, err)
            return []
        return [(start, end)]

    def read(self, start: int, end: int, now: Optional[int]) -> tuple[Optional[tuple], dict]:
        """(``whisper.fetch`` result or None, file header)."""
        return read_leaf(self.fs_path, start, end, now)


def read_leaf(fs_path: str, start: int, end: int, now: Optional[int]
              ) -> tuple[Optional[tuple], dict]:
    """(``whisper.fetch`` result or None, file header) of a plain or gzipped whisper file;
    (None, {}) when it cannot be read (logged)."""
    try:
        if fs_path.endswith('.gz'):
            with gzip.open(fs_path, 'rb') as fh:
                return whisper_read.file_fetch(fh, start, end, now)
        return whisper_read.fetch(fs_path, start, end, now)
    except (OSError, EOFError, whisper_read.WhisperError) as err:
        log.warning("failed fetch of whisper file %s: %s", fs_path, err)
        return None, {}


def _join(a: str, b: str) -> str:
    """``os.path.join(a, b)`` for two strings, without its overhead."""
    if b.startswith(os.sep):
        return b
    if not a or a.endswith(os.sep):
        return a + b
    return a + os.sep + b


def _kind(path: str) -> tuple[bool, bool, bool]:
    """(is a directory, is a regular file, is a symlink) of ``path``, following links."""
    try:
        mode = os.lstat(path).st_mode
        link = stat.S_ISLNK(mode)
        if link:
            mode = os.stat(path).st_mode
    except OSError:
        return False, False, False
    return stat.S_ISDIR(mode), stat.S_ISREG(mode), link


def _kinds(base: str, paths: list[str]) -> dict[str, int]:
    """Kind flags (IS_DIR, IS_FILE, IS_LINK) of ``base + path`` for each path."""
    if not paths:
        return {}
    return dict(zip(paths, _points.path_kinds(whisper_read.fs_names([base + p for p in paths])),
                    strict=True))


def _split_listing(listing: Optional[tuple[list[str], bytes]]
                   ) -> Optional[tuple[dict[str, bool], dict[str, bool]]]:
    """(subdirectories, files) of a ``_points.list_dirs`` listing, each name -> whether it
    is a symlink; None for a directory that could not be listed."""
    if listing is None:
        return None
    subdirs: dict[str, bool] = {}
    files: dict[str, bool] = {}
    for name, flag in zip(*listing, strict=True):
        if flag & IS_DIR:
            subdirs[name] = bool(flag & IS_LINK)
        elif flag & IS_FILE:
            files[name] = bool(flag & IS_LINK)
    return subdirs, files


def _rel(path: str, base: str) -> str:
    rel = os.path.relpath(path, base)
    return '' if rel == '.' else rel


def fs_to_metric(path: str) -> str:
    """``a/b/c.wsp`` -> ``a.b.c``."""
    dirpath, filename = os.path.split(path)
    return join(dirpath, filename.split('.')[0]).replace(os.sep, '.')


def real_metric_path(absolute_path: str, metric_path: str) -> str:
    """The metric name behind symlinks (so cache queries use carbon's name)."""
    real_absolute = os.path.realpath(absolute_path)
    if absolute_path == real_absolute:
        return metric_path
    relative_fs = metric_path.replace('.', os.sep)
    no_ext = os.path.splitext(absolute_path)[0]
    if no_ext.endswith('.wsp'):
        no_ext = no_ext[:-4]
    base = os.path.dirname(no_ext[:-len(relative_fs)])
    real_base = os.path.realpath(base)
    return fs_to_metric(real_absolute[len(real_base):].lstrip(os.sep))


class WhisperFinder:
    """Finds and reads whisper files; one per app."""

    local = True
    tags = False
    name = 'local'

    def __init__(self, whisper_dir: str, carbonlink: Optional[CarbonLinkPool] = None,
                 max_entries: float = float('inf')) -> None:
        self.root = whisper_dir
        self.carbonlink = carbonlink
        self.max_entries = max_entries  # FIND_MAX_ENTRIES: directory entries one find reads

    # --- find ---------------------------------------------------------------------------
    def find_nodes(self, pattern: str, leaves_only: bool = False) -> list[Node]:
        """Nodes matching ``pattern`` (duplicates across brace variants removed)."""
        return [WhisperLeaf(metric, fs_path, real) if fs_path is not None else
                Node(metric, False) for metric, fs_path, real in self._matches(pattern,
                                                                             leaves_only)]

    def _matches(self, pattern: str, leaves_only: bool) -> list[tuple[str, Any, str]]:
        """(metric, file path, carbon's name) of each leaf and (metric, None, metric) of
        each branch matching ``pattern``, in find order, duplicates removed."""
        clean = pattern.replace('\\', '')
        out: dict[Any, tuple[str, Any, str]] = {}
        if ';' in pattern and not pattern.startswith('_tagged.'):
            names = [pattern]
            try:
                names.append(carbon_tags.normalize(pattern))
            except ValueError:
                pass
            for name in names:
                for hash_only in (True, False):
                    rel = carbon_tags.encode(name, sep=os.sep, hash_only=hash_only)
                    for ext in ('.wsp', '.wsp.gz'):
                        fs_path = join(self.root, rel + ext)
                        if pattern not in out and isfile(fs_path):
                            out[pattern] = (pattern, fs_path, name)
            return list(out.values())
        parts = clean.split('.')
        if not isdir(self.root):
            return []
        seen = [0]  # directory entries read by this find
        if _points is not None and len(parts) <= 65 and \
                not any(not p or '**' in p or os.sep in p for p in parts):
            found = self._find_levels(parts, leaves_only, seen)
        else:
            found = self._find_paths(self.root, parts, 0, leaves_only, seen)
        root = self.root if self.root.endswith(os.sep) else self.root + os.sep
        sep = os.sep
        for rel, is_dir, link in found:
            head, _, tail = rel.rpartition(sep)
            if tail[:1] == '.':
                continue
            metric = tail.split('.', 1)[0]
            if head:
                metric = (head + sep + metric).replace(sep, '.')
            if not is_dir:
                if (rel.endswith('.wsp') or rel.endswith('.wsp.gz')) and \
                        (metric, True) not in out:
                    absolute = rel if rel[:1] == sep else root + rel
                    real = real_metric_path(absolute, metric) if link else metric
                    out[(metric, True)] = (metric, absolute, real)
            elif not leaves_only and (metric, False) not in out and \
                    not (rel.endswith('.wsp') or rel.endswith('.wsp.gz')):
                out[(metric, False)] = (metric, None, metric)
        return list(out.values())

    def _count_entries(self, seen: list[int], entries: int) -> None:
        seen[0] += entries
        if seen[0] > self.max_entries:
            raise FindLimitError('the find reads more than FIND_MAX_ENTRIES = %d '
                                 'directory entries' % self.max_entries)

    def _find_levels(self, parts: list[str], leaves_only: bool, seen: list[int]
                     ) -> Iterator[tuple[str, bool, bool]]:
        """What ``_find_paths`` yields, in the same order, found a level at a time: the
        matching directories of a wildcard level are listed in one C call (entry kinds
        from readdir's d_type), and a literal level's names are looked up in another.
        Relative paths are kept with their trailing separator (no part holds one)."""
        nodes: list[tuple[str, bool]] = [('', False)]   # (relative dir + sep, crossed link)
        last = len(parts) - 1
        base = self.root if self.root.endswith(os.sep) else self.root + os.sep
        for depth, raw in enumerate(parts):
            variants = [(v, '*' in v or '?' in v or '[' in v) for v in expand_braces(raw)]
            listed: dict[str, Any] = {}
            if any(wild for _, wild in variants):
                listed = dict(zip([rel for rel, _ in nodes], _points.list_dirs(
                    whisper_read.fs_names([base + rel for rel, _ in nodes])), strict=True))
            kinds = self._literal_kinds(base, nodes, variants, depth == last, leaves_only)
            following: list[tuple[str, bool]] = []
            final = depth == last
            for rel, crossed in nodes:
                # the node's listing split into subdirectories and files, once for all
                # its brace variants (None: it cannot be listed)
                split = _split_listing(listed[rel]) if listed else None
                if listed and split is None:
                    log.warning("cannot list %s", base + rel)
                for variant, wild in variants:
                    subdirs: dict[str, bool]
                    files: dict[str, bool] = {}
                    if wild:
                        subdirs, files = split or ({}, {})
                        if split is not None:
                            self._count_entries(seen, len(listed[rel][0]))
                        matching = match_entries(list(subdirs), variant)
                    else:
                        flag = kinds.get(rel + variant, 0)
                        subdirs = {variant: bool(flag & IS_LINK)} if flag & IS_DIR else {}
                        matching = list(subdirs)
                    if not final:
                        following.extend((rel + sub + os.sep, crossed or subdirs.get(sub, True))
                                         for sub in matching)
                        continue
                    if wild:
                        for name in match_entries(list(files), variant + '.*'):
                            yield rel + name, False, crossed or files[name]
                    else:
                        for name in (variant + '.wsp', variant + '.wsp.gz'):
                            flag = kinds.get(rel + name, 0)
                            if flag & IS_FILE:
                                yield rel + name, False, crossed or bool(flag & IS_LINK)
                                break
                    for name in matching:
                        yield rel + name, True, crossed or subdirs.get(name, True)
            nodes = following

    @staticmethod
    def _literal_kinds(base: str, nodes: list[tuple[str, bool]],
                       variants: list[tuple[str, bool]], last: bool,
                       leaves_only: bool) -> dict[str, int]:
        """Kind flags of the paths a level's literal names stand for (relative path ->
        flags): the names as directories (unless only leaves are wanted at the last
        level), and at the last level ``name.wsp``, then ``name.wsp.gz`` where the first
        is not a file."""
        literal = [v for v, wild in variants if not wild]
        if not literal:
            return {}
        asked = [rel + v for rel, _ in nodes for v in literal] \
            if not last or not leaves_only else []
        if last:
            asked += [rel + v + '.wsp' for rel, _ in nodes for v in literal]
        kinds = _kinds(base, asked)
        if last:
            kinds.update(_kinds(base, [rel + v + '.wsp.gz' for rel, _ in nodes for v in literal
                                       if not kinds[rel + v + '.wsp'] & IS_FILE]))
        return kinds

    def _find_paths(self, current: str, patterns: list[str], depth: int,
                    leaves_only: bool = False, seen: Optional[list[int]] = None
                    ) -> Iterator[tuple[str, bool, bool]]:
        """(relative path, is a directory, a symlink was crossed) of each match.

        Entry kinds come from ``scandir`` (or one ``lstat`` for a literal name), so
        matches cost no further system calls; symlinks are only resolved later for
        paths that crossed one.
        """
        if depth > 64:
            return
        raw = patterns[0]
        rest = patterns[1:]
        for pattern in expand_braces(raw):
            wildcard = '*' in pattern or '?' in pattern or '[' in pattern
            subdirs: dict[str, bool] = {}
            files: dict[str, bool] = {}
            matching_dirs: list[str] = []
            if wildcard:
                try:
                    with os.scandir(current) as it:
                        for entry in it:
                            if seen is not None:
                                self._count_entries(seen, 1)
                            if entry.is_dir():
                                subdirs[entry.name] = entry.is_symlink()
                            elif entry.is_file():
                                files[entry.name] = entry.is_symlink()
                except OSError as err:
                    log.warning("cannot list %s: %s", current, err)
                if pattern == '**':
                    matching_dirs = [_rel(root, current) for root, _, _ in os.walk(current)]
                    if not rest:
                        rest = ['*']
                else:
                    matching_dirs = match_entries(list(subdirs), pattern)
            elif rest or not leaves_only:
                is_dir, _, link = _kind(_join(current, pattern))
                if is_dir:
                    matching_dirs = [pattern]
                    subdirs[pattern] = link
            if rest:
                for sub in matching_dirs:
                    crossed = subdirs.get(sub, True)
                    for match, is_dir, link in self._find_paths(_join(current, sub), rest,
                                                                depth + 1, leaves_only, seen):
                        yield (_join(sub, match) if sub else match), is_dir, link or crossed
                continue
            if wildcard:
                for name in match_entries(list(files), pattern + '.*'):
                    yield name, False, files[name]
            else:
                for name in (pattern + '.wsp', pattern + '.wsp.gz'):
                    _, is_file, link = _kind(_join(current, name))
                    if is_file:
                        yield name, False, link
                        break  # a .wsp.gz of the same metric would be dropped anyway
            for name in matching_dirs:
                yield name, True, subdirs.get(name, True)

    def get_index(self) -> list[str]:
        """Every ``.wsp`` metric under the root, sorted."""
        matches = []
        root_len = len(self.root.rstrip(os.sep)) + 1
        for root, _, files in os.walk(self.root):
            rel = root[root_len:]
            for name in files:
                if name.endswith('.wsp'):
                    matches.append(join(rel, name[:-4]).replace(os.sep, '.').lstrip('.'))
        return sorted(matches)

    # --- fetch --------------------------------------------------------------------------
    def fetch(self, patterns: list[str], start: int, end: int, now: Optional[int],
              context: dict[str, Any]) -> list[dict[str, Any]]:
        """Read every leaf matching ``patterns``, merged with cached points.

        The carbonlink bulk query for all leaves runs while the files are read.
        """
        leaves: list[tuple[str, str, str, str]] = []   # (pattern, metric, file, real name)
        for pattern in patterns:
            leaves.extend([(pattern, metric, fs_path, real) for metric, fs_path, real
                           in self._matches(pattern, True) if fs_path is not None])
        if not leaves:
            return []
        pending: Optional[Future] = None
        if self.carbonlink is not None and self.carbonlink.hosts:
            names = sorted({leaf[3] for leaf in leaves})
            pending = self.carbonlink.query_bulk_async(names)
        out = []
        merges = []          # (answer, real name, header) of each answer, for cached points
        plain = [leaf[2] for leaf in leaves if not leaf[2].endswith('.gz')]
        read = iter(whisper_read.read_many(plain, start, end, now, context.get('budget')))
        for pattern, metric, fs_path, real in leaves:
            if fs_path.endswith('.gz'):
                data, header = read_leaf(fs_path, start, end, now)
            else:
                answer = next(read)
                if isinstance(answer, Exception):
                    log.warning("failed fetch of whisper file %s: %s", fs_path, answer)
                    continue
                data, header = answer
            if data is None:
                continue
            result = {'pathExpression': pattern, 'name': metric, 'path': metric,
                      'time_info': tuple(data[0]), 'values': data[1]}
            out.append(result)
            if pending is not None:
                merges.append((result, real, header))
        if pending is not None:
            cached = self.carbonlink.wait(pending)
            for result, real, header in merges:
                points = cached.get(real)
                if not points:
                    continue
                time_info = result['time_info']
                try:
                    result['values'] = merge_with_cache(
                        points, time_info[0], time_info[2], to_list(result['values']),
                        header['aggregationMethod'], header['archives'][0]['secondsPerPoint'])
                except (ValueError, TypeError, KeyError) as err:
                    log.warning("cannot merge cache for %s: %s", result['name'], err)
        return out
