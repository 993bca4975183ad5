"""The events store: graphite-web's ``events_event`` table in an SQLite file.

Rows are laid out as graphite-web 1.1.10 (Django) writes them: ``when`` is UTC text
``YYYY-MM-DD HH:MM:SS[.ffffff]`` and ``tags`` the text the event was posted with, so
a graphite.db written by graphite-web can be read and vice versa. Tag matching is
django-tagging's over the tag names parsed from that text (see :meth:`EventStore.find`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Iterable, Optional, Sequence

from webapp.events.tagparse import parse_tag_input
from webapp.render.attime import epoch

_SCHEMA = """
CREATE TABLE IF NOT EXISTS "events_event" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT,
    "when" datetime NOT NULL, "what" varchar(255) NOT NULL, "data" text NOT NULL,
    "tags" varchar(255) NOT NULL);
CREATE INDEX IF NOT EXISTS "webapp_events_event_when" ON "events_event" ("when");
"""
_COLUMNS = 'SELECT "id", "when", "what", "data", "tags" FROM "events_event"'


def db_time(when: datetime) -> str:
    """Django's SQLite text for an aware datetime (naive UTC, microseconds when non-zero)."""
    return str(when.astimezone(UTC).replace(tzinfo=None))


def parse_db_time(text: str) -> datetime:
    """The aware UTC datetime of a stored ``when``."""
    value = datetime.fromisoformat(str(text))
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass
class Event:
    """One row of events_event; ``tags`` is the stored text."""

    id: int
    when: datetime
    what: str
    data: str
    tags: str

    @property
    def timestamp(self) -> int:
        """Whole epoch seconds of ``when``."""
        return epoch(self.when)

    def as_dict(self) -> dict[str, Any]:
        """graphite-web's Event.as_dict (tags split on whitespace, when as epoch)."""
        return {'when': self.timestamp, 'what': self.what, 'data': self.data,
                'tags': self.tags.split(), 'id': self.id}


class EventStore:
    """Thread-safe events in one SQLite file, opened (and the table created) on first use."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._conn: Optional[sqlite3.Connection] = None

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False,
                                   isolation_level=None)
            conn.executescript(_SCHEMA)
            self._conn = conn
        return self._conn

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._lock:
            return self._db().execute(sql, params).fetchall()

    def close(self) -> None:
        """Close the connection (it is reopened if the store is used again)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def create(self, what: str, data: str, tags: str, when: datetime) -> int:
        """Store an event; its new id."""
        with self._lock:
            cursor = self._db().execute(
                'INSERT INTO "events_event" ("when", "what", "data", "tags") '
                'VALUES (?, ?, ?, ?)', (db_time(when), what, data, tags))
            return int(cursor.lastrowid or 0)

    def get(self, event_id: int) -> Optional[Event]:
        """The event with ``event_id``, or None."""
        rows = self._query(_COLUMNS + ' WHERE "id" = ?', (event_id,))
        return _event(rows[0]) if rows else None

    def delete(self, event_id: int) -> bool:
        """Remove an event; False when there was none with that id."""
        with self._lock:
            cursor = self._db().execute('DELETE FROM "events_event" WHERE "id" = ?',
                                        (event_id,))
            return cursor.rowcount > 0

    def _known(self, names: Iterable[str]) -> set[str]:
        """The ``names`` some stored event is tagged with (django-tagging's Tag rows)."""
        wanted = {n for n in names if n}
        if not wanted:
            return set()
        where = ' OR '.join(['instr("tags", ?) > 0'] * len(wanted))
        rows = self._query('SELECT DISTINCT "tags" FROM "events_event" WHERE ' + where,
                           sorted(wanted))
        found: set[str] = set()
        for (text,) in rows:
            found.update(wanted.intersection(parse_tag_input(text)))
        return found

    def find(self, start: Optional[datetime] = None, end: Optional[datetime] = None,
             tags: Optional[Sequence[str]] = None,
             set_operation: Optional[str] = None) -> list[Event]:
        """Events with start <= when <= end, ordered by time, matching ``tags``.

        As graphite-web with django-tagging: requested names no event carries are
        ignored, except that ``union`` needs any of the names and the default needs all
        the known ones (none known: no events). ``intersection`` also needs every
        requested word, each once, among the event's whitespace-split tags.
        """
        clauses, params = [], []
        if start is not None:
            clauses.append('"when" >= ?')
            params.append(db_time(start))
        if end is not None:
            clauses.append('"when" <= ?')
            params.append(db_time(end))
        if tags is None:
            required: set[str] = set()
        elif set_operation == 'union':
            wanted = {t for t in tags if t}
            if not wanted:
                return []
            clauses.append('(' + ' OR '.join(['instr("tags", ?) > 0'] * len(wanted)) + ')')
            params.extend(sorted(wanted))
        else:
            required = self._known(tags)
            if not required:
                return []
            clauses.extend(['instr("tags", ?) > 0'] * len(required))
            params.extend(sorted(required))
        sql = _COLUMNS + (' WHERE ' + ' AND '.join(clauses) if clauses else '')
        events = [_event(row) for row in self._query(sql + ' ORDER BY "when", "id"', params)]
        if tags is None:
            return events
        if set_operation == 'union':
            return [e for e in events if wanted.intersection(parse_tag_input(e.tags))]
        events = [e for e in events if required.issubset(parse_tag_input(e.tags))]
        if set_operation == 'intersection':
            asked = list(tags)
            events = [e for e in events
                      if len(set(asked) & set(e.tags.split())) == len(asked)]
        return events

    def event_times(self, start: int, end: int, tags: Optional[Sequence[str]]) -> list[int]:
        """Epoch seconds of the events between ``start`` and ``end`` (the render
        function ``events()``; ``tags`` None for all, else every known tag required)."""
        found = self.find(datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC),
                          tags)
        return [e.timestamp for e in found]


def _event(row: tuple) -> Event:
    event_id, when, what, data, tags = row
    return Event(int(event_id), parse_db_time(when), str(what), str(data), str(tags or ''))


def make_event_store(settings: Any) -> EventStore:
    """The store in the TagDB's SQLite file (TAGDB_SQLITE_PATH, graphite.db by default)."""
    return EventStore(settings.TAGDB_SQLITE_PATH)
