"""The TagDB: tagged series in SQLite, with graphite-web's semantics and table layout.

The schema is graphite-web's own (tags_tag, tags_tagvalue, tags_series,
tags_seriestag), so an existing graphite.db from graphite-web 1.1 can be used as is.
Tag expressions: ``tag=spec``, ``tag!=spec``, ``tag=~regex``, ``tag!=~regex``; a spec
that matches the empty value also matches series without the tag; regexes are
anchored at the start; at least one expression must require a non-empty value.
"""

from __future__ import annotations

import bisect
import re
import sqlite3
import threading
import time
from hashlib import sha256
from typing import Any, Iterable, Optional

from carbon import tags as carbon_tags

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tags_tag (id integer PRIMARY KEY AUTOINCREMENT,
    tag varchar(191) NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS tags_tagvalue (id integer PRIMARY KEY AUTOINCREMENT,
    value varchar(191) NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS tags_series (id integer PRIMARY KEY AUTOINCREMENT,
    hash varchar(64) NOT NULL UNIQUE, path text NOT NULL);
CREATE TABLE IF NOT EXISTS tags_seriestag (id integer PRIMARY KEY AUTOINCREMENT,
    series_id integer NOT NULL REFERENCES tags_series (id),
    tag_id integer NOT NULL REFERENCES tags_tag (id),
    value_id integer NOT NULL REFERENCES tags_tagvalue (id),
    UNIQUE (series_id, tag_id));
CREATE INDEX IF NOT EXISTS tags_seriestag_tag_id ON tags_seriestag (tag_id);
CREATE INDEX IF NOT EXISTS tags_seriestag_value_id ON tags_seriestag (value_id);
"""
_TAGSPEC = re.compile(r'^([^;!=]+)(!?=~?)([^;]*)$')


SQL_INT_MAX = 2 ** 63 - 1


class TagSpecError(ValueError):
    """A malformed tag expression or tagged name (HTTP 400)."""


def parse_tagspec(spec: str) -> tuple[str, str, str]:
    """``"tag!=~re"`` -> ('tag', '!=~', 're')."""
    m = _TAGSPEC.match(spec)
    if m is None:
        raise TagSpecError("Invalid tagspec %s" % spec)
    return m.group(1), m.group(2), m.group(3)


def _regexp(pattern: str, value: Any) -> bool:
    return re.search(pattern, str(value)) is not None


def _anchored(spec: str) -> str:
    return spec if spec.startswith('^') else '^(' + spec + ')'


def parse_series(path: str) -> carbon_tags.TaggedSeries:
    try:
        return carbon_tags.parse(path)
    except ValueError as err:
        raise TagSpecError(str(err)) from None


class SQLiteTagDB:
    """Thread-safe TagDB in one SQLite file; find results cached for TAGDB_CACHE_DURATION."""

    def __init__(self, path: str, cache_duration: float = 60,
                 autocomplete_limit: int = 100) -> None:
        self.path = path
        self.cache_duration = float(cache_duration)
        self.autocomplete_limit = int(autocomplete_limit)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, timeout=30, check_same_thread=False,
                                     isolation_level=None)
        self._conn.create_function('REGEXP', 2, _regexp, deterministic=True)
        self._conn.executescript(_SCHEMA)
        self._cache: dict[tuple, tuple[float, list[str]]] = {}

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _query(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        with self._lock:
            return self._conn.execute(sql, list(params)).fetchall()

    # --- lookups ---------------------------------------------------------------------------
    def find_series(self, exprs: list[str], requestContext: Any = None) -> list[str]:
        """Paths of the series matching every tag expression, sorted."""
        key = tuple(sorted(exprs))
        hit = self._cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < self.cache_duration:
            return list(hit[1])
        result = self._find_series(exprs)
        if self.cache_duration > 0:
            if len(self._cache) > 10000:
                self._cache.clear()
            self._cache[key] = (time.monotonic(), result)
        return list(result)

    def _find_series(self, exprs: list[str]) -> list[str]:
        sql = 'SELECT s.path FROM tags_series AS s'
        params: list[Any] = []
        where: list[str] = []
        where_params: list[Any] = []
        filters = []
        all_match_empty = True
        for i, tagspec in enumerate(exprs, 1):
            tag, op, spec = parse_tagspec(tagspec)
            s = str(i)
            if op == '=':
                matches_empty = spec == ''
                if not matches_empty:
                    where.append('v%s.value=?' % s)
                    where_params.append(spec)
            elif op == '=~':
                spec = _anchored(spec)
                matches_empty = bool(_safe_match(spec, ''))
                if not matches_empty:
                    where.append('v%s.value REGEXP ?' % s)
                    where_params.append(spec)
            elif op == '!=':
                matches_empty = spec != ''
                if not matches_empty:
                    where.append('v%s.value<>?' % s)
                    where_params.append(spec)
            else:  # '!=~'
                spec = _anchored(spec)
                matches_empty = not _safe_match(spec, '')
                if not matches_empty:
                    where.append('NOT (v%s.value REGEXP ?)' % s)
                    where_params.append(spec)
            if matches_empty:
                filters.append((tag, op, spec))
            else:
                sql += (f' JOIN tags_tag AS t{s} ON t{s}.tag=?'
                        f' JOIN tags_seriestag AS st{s} ON st{s}.series_id=s.id'
                        f' AND st{s}.tag_id=t{s}.id'
                        f' JOIN tags_tagvalue AS v{s} ON v{s}.id=st{s}.value_id')
                params.append(tag)
            all_match_empty = all_match_empty and matches_empty
        if all_match_empty:
            raise TagSpecError("At least one tagspec must not match the empty string")
        if where:
            sql += ' WHERE ' + ' AND '.join(where)
            params.extend(where_params)
        sql += ' ORDER BY s.path'
        try:
            rows = self._query(sql, params)
        except sqlite3.OperationalError as err:
            raise TagSpecError("Invalid tag expression: %s" % err) from None
        return [row[0] for row in rows if _matches_filters(row[0], filters)]

    def list_tags(self, tagFilter: Optional[str] = None, limit: Any = None,
                  requestContext: Any = None) -> list[dict[str, Any]]:
        sql = 'SELECT t.id, t.tag FROM tags_tag AS t'
        params: list[Any] = []
        if tagFilter:
            sql += ' WHERE t.tag REGEXP ?'
            params.append(_anchored(tagFilter))
        sql += ' ORDER BY t.tag'
        if limit:
            sql += ' LIMIT ?'
            params.append(_sql_limit(limit))
        return [{'id': i, 'tag': t} for i, t in self._checked(sql, params)]

    def get_tag(self, tag: str, valueFilter: Optional[str] = None, limit: Any = None,
                requestContext: Any = None) -> Optional[dict[str, Any]]:
        rows = self._query('SELECT t.id, t.tag FROM tags_tag AS t WHERE t.tag=?', [tag])
        if not rows:
            return None
        tag_id, tag = rows[0]
        return {'id': tag_id, 'tag': tag,
                'values': self.list_values(tag, valueFilter=valueFilter, limit=limit)}

    def list_values(self, tag: str, valueFilter: Optional[str] = None, limit: Any = None,
                    requestContext: Any = None) -> list[dict[str, Any]]:
        sql = ('SELECT v.id, v.value, COUNT(st.id) FROM tags_tagvalue AS v'
               ' JOIN tags_seriestag AS st ON st.value_id=v.id'
               ' JOIN tags_tag AS t ON t.id=st.tag_id WHERE t.tag=?')
        params: list[Any] = [tag]
        if valueFilter:
            sql += ' AND v.value REGEXP ?'
            params.append(_anchored(valueFilter))
        sql += ' GROUP BY v.id, v.value ORDER BY v.value'
        if limit:
            sql += ' LIMIT ?'
            params.append(_sql_limit(limit))
        return [{'id': i, 'value': v, 'count': c} for i, v, c in self._checked(sql, params)]

    def _checked(self, sql: str, params: list[Any]) -> list[tuple]:
        try:
            return self._query(sql, params)
        except sqlite3.OperationalError as err:
            raise TagSpecError("Invalid filter: %s" % err) from None

    # --- writes ----------------------------------------------------------------------------
    def tag_series(self, series: str, requestContext: Any = None) -> str:
        """Upsert a tagged name; returns its canonical path (tags sorted)."""
        parsed = parse_series(series)
        path = parsed.path
        path_hash = _hash(path)
        items = list(parsed.tags.items())
        with self._lock:
            cur = self._conn.cursor()
            cur.execute('BEGIN IMMEDIATE')
            try:
                cur.executemany('INSERT OR IGNORE INTO tags_tag (tag) VALUES (?)',
                                [(t,) for t, _ in items])
                cur.executemany('INSERT OR IGNORE INTO tags_tagvalue (value) VALUES (?)',
                                [(v,) for _, v in items])
                cur.execute('INSERT OR IGNORE INTO tags_series (hash, path) VALUES (?, ?)',
                            (path_hash, path))
                series_id = cur.execute('SELECT id FROM tags_series WHERE hash=?',
                                        (path_hash,)).fetchone()[0]
                for tag, value in items:
                    cur.execute(
                        'INSERT OR IGNORE INTO tags_seriestag (series_id, tag_id, value_id)'
                        ' SELECT ?, t.id, v.id FROM tags_tag AS t, tags_tagvalue AS v'
                        ' WHERE t.tag=? AND v.value=?', (series_id, tag, value))
                cur.execute('COMMIT')
            except BaseException:
                cur.execute('ROLLBACK')
                raise
            self._cache.clear()
        return path

    def tag_multi_series(self, seriesList: list[str], requestContext: Any = None) -> list[str]:
        return [self.tag_series(s) for s in seriesList]

    def del_series(self, series: str, requestContext: Any = None) -> bool:
        path_hash = _hash(parse_series(series).path)
        with self._lock:
            row = self._conn.execute('SELECT id FROM tags_series WHERE hash=?',
                                     (path_hash,)).fetchone()
            if row:
                self._conn.execute('DELETE FROM tags_seriestag WHERE series_id=?', (row[0],))
                self._conn.execute('DELETE FROM tags_series WHERE id=?', (row[0],))
            self._cache.clear()
        return True

    def del_multi_series(self, seriesList: list[str], requestContext: Any = None) -> bool:
        for series in seriesList:
            self.del_series(series)
        return True

    # --- autocomplete ----------------------------------------------------------------------
    def auto_complete_tags(self, exprs: list[str], tagPrefix: Optional[str] = None,
                           limit: Any = None, requestContext: Any = None) -> list[str]:
        limit = self.autocomplete_limit if limit is None else int(limit)
        if not exprs:
            return [t['tag'] for t in self.list_tags(
                tagFilter='^(' + re.escape(tagPrefix) + ')' if tagPrefix else None, limit=limit)]
        searched = {parse_tagspec(e)[0] for e in exprs}
        result: list[str] = []
        for path in self.find_series(exprs):
            try:
                tags = carbon_tags.parse(path).tags
            except ValueError:
                continue
            for tag in tags:
                if tag in searched or (tagPrefix and not tag.startswith(tagPrefix)):
                    continue
                _insert_limited(result, tag, limit)
        return result

    def auto_complete_values(self, exprs: list[str], tag: str, valuePrefix: Optional[str] = None,
                             limit: Any = None, requestContext: Any = None) -> list[str]:
        limit = self.autocomplete_limit if limit is None else int(limit)
        if not exprs:
            return [v['value'] for v in self.list_values(
                tag, valueFilter='^(' + re.escape(valuePrefix) + ')' if valuePrefix else None,
                limit=limit)]
        result: list[str] = []
        for path in self.find_series(list(exprs) + [tag + '!=']):
            try:
                value = carbon_tags.parse(path).tags.get(tag)
            except ValueError:
                continue
            if value is None or (valuePrefix and not value.startswith(valuePrefix)):
                continue
            _insert_limited(result, value, limit)
        return result


def _sql_limit(limit: Any) -> int:
    """A LIMIT for sqlite: beyond its 64-bit integers means no limit (not a 500)."""
    return max(-1, min(int(limit), SQL_INT_MAX))


def _insert_limited(result: list[str], item: str, limit: int) -> None:
    """Keep ``result`` sorted, unique and at most ``limit`` long."""
    if item in result:
        return
    if not result or item >= result[-1]:
        if len(result) < limit:
            result.append(item)
        return
    bisect.insort_left(result, item)
    if len(result) > limit:
        del result[-1]


def _hash(path: str) -> str:
    return sha256(path.encode('utf8')).hexdigest()


def _safe_match(pattern: str, value: str) -> Any:
    try:
        return re.match(pattern, value)
    except re.error as err:
        raise TagSpecError("Invalid regular expression %r: %s" % (pattern, err)) from None


def _matches_filters(path: str, filters: list[tuple[str, str, str]]) -> bool:
    if not filters:
        return True
    try:
        tags = carbon_tags.parse(path).tags
    except ValueError:
        return False
    for tag, op, spec in filters:
        value = tags.get(tag, '')
        if (op == '=' and value != spec) or (op == '=~' and re.match(spec, value) is None) or \
                (op == '!=' and value == spec) or (op == '!=~' and re.match(spec, value)):
            return False
    return True


def make_tagdb(settings: Any) -> Optional[SQLiteTagDB]:
    """The TagDB named by TAGDB (graphite-web's LocalDatabaseTagDB or '' for none)."""
    name = settings.TAGDB or ''
    if not name or name.endswith('DummyTagDB'):
        return None
    if name.endswith('LocalDatabaseTagDB') or name in ('sqlite', 'webapp.tags.tagdb.SQLiteTagDB'):
        import os
        os.makedirs(os.path.dirname(os.path.abspath(settings.TAGDB_SQLITE_PATH)), exist_ok=True)
        return SQLiteTagDB(settings.TAGDB_SQLITE_PATH, settings.TAGDB_CACHE_DURATION,
                           settings.TAGDB_AUTOCOMPLETE_LIMIT)
    from carbon.config.errors import ConfigError
    raise ConfigError("unsupported TagDB %r (use LocalDatabaseTagDB or '')" % name, key='TAGDB')
