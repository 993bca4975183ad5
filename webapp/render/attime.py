"""Graphite's time expressions (``from``/``until``/``now``): the same rules as graphite-web.

Accepted: ``now``, epoch seconds, relative offsets (``-6h``, ``-5min``, ``-2weeks``,
``-1mon`` = 30 days, ``-1y`` = 365 days, several terms like ``-1d2h``), absolute
references (``HH:MM_YYYYMMDD``, ``YYYYMMDD``, ``MM/DD/YY[YY]``, ``jan 5``, weekday
names, ``midnight``/``noon``/``teatime``, ``Xam``/``Xpm``, ``today``/``yesterday``/
``tomorrow``) and a reference plus an offset (``now-1d``, ``noon+2h``). Offsets add
absolute seconds (DST-safe); references are wall-clock times in the request's zone.
"""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta, tzinfo as TzInfo, UTC
from functools import lru_cache
from typing import Mapping
from zoneinfo import ZoneInfo

MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec']
WEEKDAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat']
_ZERO = timedelta(0)


@lru_cache(maxsize=64)
def get_timezone(name: str) -> TzInfo:
    """The zone called ``name``; ValueError when unknown."""
    try:
        return ZoneInfo(name)
    except Exception:
        raise ValueError("unknown time zone %r" % name) from None


def request_timezone(params: Mapping[str, str], default: str) -> TzInfo:
    """The zone a request's ``tz`` parameter names, else ``default`` (graphite-web
    ignores an unknown ``tz``)."""
    zone = get_timezone(default)
    if 'tz' in params:
        try:
            zone = get_timezone(params['tz'])
        except ValueError:
            pass
    return zone


def localize(naive: datetime, tz: TzInfo) -> datetime:
    """Attach ``tz`` to a wall-clock time (ambiguous/missing times as pytz's is_dst=False)."""
    first = naive.replace(tzinfo=tz, fold=0)
    second = naive.replace(tzinfo=tz, fold=1)
    if first.utcoffset() == second.utcoffset():
        return first.astimezone(tz)
    chosen = first if first.dst() == _ZERO else second
    return chosen.astimezone(tz)


def epoch(dt: datetime) -> int:
    """Whole epoch seconds of an aware datetime."""
    return calendar.timegm(dt.astimezone(UTC).timetuple())


def parse_at_time(s: str | datetime, tz: TzInfo, now: str | datetime | None = None) -> datetime:
    """An aware datetime in ``tz`` for a graphite time expression; ValueError if malformed."""
    if isinstance(s, datetime):
        return s.astimezone(tz) if s.tzinfo else localize(s, tz)
    s = s.strip().lower().replace('_', '').replace(',', '').replace(' ', '')
    if s.isdigit():
        if not (len(s) == 8 and int(s[:4]) > 1900 and int(s[4:6]) < 13 and int(s[6:]) < 32):
            try:
                return datetime.fromtimestamp(int(s), tz)
            except (OverflowError, OSError, ValueError):
                raise ValueError("timestamp out of range: %s" % s) from None
    if '+' in s:
        ref, offset = s.split('+', 1)
        offset = '+' + offset
    elif '-' in s:
        ref, offset = s.split('-', 1)
        offset = '-' + offset
    else:
        ref, offset = s, ''
    base = parse_time_reference(ref, tz, now)
    try:
        return (base.astimezone(UTC) + parse_time_offset(offset)).astimezone(tz)
    except OverflowError:
        raise ValueError("date out of range: %s" % s) from None


def parse_time_reference(ref: str, tz: TzInfo, now: str | datetime | None = None) -> datetime:
    """The absolute part of an expression (``noon yesterday``, ``20200101``, ``now``)."""
    if now is None:
        now = datetime.now(tz)
    else:
        now = parse_at_time(now, tz)
    if not ref or ref == 'now':
        return now
    raw_ref = ref
    hour, minute = 0, 0
    try:
        i = ref.find(':')
        if 0 < i < 3:
            hour = int(ref[:i])
            minute = int(ref[i + 1:i + 3])
            ref = ref[i + 3:]
            if ref[:2] == 'am':
                ref = ref[2:]
            elif ref[:2] == 'pm':
                hour = (hour + 12) % 24
                ref = ref[2:]
        i = ref.find('am')
        if 0 < i < 3:
            hour = int(ref[:i])
            ref = ref[i + 2:]
        i = ref.find('pm')
        if 0 < i < 3:
            hour = (int(ref[:i]) + 12) % 24
            ref = ref[i + 2:]
    except ValueError:
        raise ValueError("Invalid time of day: %s" % raw_ref) from None
    if ref.startswith('noon'):
        hour, minute = 12, 0
        ref = ref[4:]
    elif ref.startswith('midnight'):
        hour, minute = 0, 0
        ref = ref[8:]
    elif ref.startswith('teatime'):
        hour, minute = 16, 0
        ref = ref[7:]
    try:
        ref_date = now.replace(hour=hour, minute=minute, second=0, microsecond=0, tzinfo=None)
        ref_date = _day_reference(ref, raw_ref, ref_date, hour, minute)
    except (TypeError, OverflowError) as err:
        raise ValueError("Invalid time reference %s: %s" % (raw_ref, err)) from None
    return localize(ref_date, tz)


def _day_reference(ref: str, raw_ref: str, ref_date: datetime, hour: int,
                   minute: int) -> datetime:
    if ref in ('yesterday', 'today', 'tomorrow'):
        if ref == 'yesterday':
            ref_date -= timedelta(days=1)
        elif ref == 'tomorrow':
            ref_date += timedelta(days=1)
    elif ref.count('/') == 2:
        try:
            m, d, y = map(int, ref.split('/'))
        except ValueError:
            raise ValueError("Invalid date: %s" % raw_ref) from None
        if y < 1900:
            y += 1900
        if y < 1970:
            y += 100
        ref_date = datetime(year=y, month=m, day=d, hour=hour, minute=minute)
    elif len(ref) == 8 and ref.isdigit():
        ref_date = datetime(year=int(ref[:4]), month=int(ref[4:6]), day=int(ref[6:8]),
                            hour=hour, minute=minute)
    elif ref[:3] in MONTHS:
        if ref[-2:].isdigit():
            d = int(ref[-2:])
        elif ref[-1:].isdigit():
            d = int(ref[-1:])
        else:
            raise ValueError("Day of month required after month name")
        ref_date = datetime(year=ref_date.year, month=MONTHS.index(ref[:3]) + 1, day=d,
                            hour=hour, minute=minute)
    elif ref[:3] in WEEKDAYS:
        today = (ref_date.weekday() + 1) % 7
        day_offset = today - WEEKDAYS.index(ref[:3])
        if day_offset < 0:
            day_offset += 7
        ref_date -= timedelta(days=day_offset)
    elif ref:
        raise ValueError("Unknown day reference: %s" % raw_ref)
    return ref_date


def parse_time_offset(offset: str) -> timedelta:
    """``-1d2h`` -> timedelta; graphite's units: s, min, h, d, w, mon (30d), y (365d)."""
    if not offset:
        return timedelta()
    t = timedelta()
    if offset[0].isdigit():
        sign = 1
    else:
        if offset[0] not in '+-':
            raise ValueError('Invalid offset: %s' % offset)
        sign = 1 if offset[0] == '+' else -1
        offset = offset[1:]
    whole = offset
    while offset:
        i = 0
        while i < len(offset) and offset[i].isdigit():
            i += 1
        if i == 0:
            raise ValueError('Invalid offset: %s' % whole)
        num = int(offset[:i])
        offset = offset[i:]
        j = 0
        while j < len(offset) and offset[j].isalpha():
            j += 1
        unit = offset[:j]
        offset = offset[j:]
        unit_name = get_unit_string(unit)
        if unit_name == 'months':
            unit_name, num = 'days', num * 30
        elif unit_name == 'years':
            unit_name, num = 'days', num * 365
        try:
            t += timedelta(**{unit_name: sign * num})
        except OverflowError:
            raise ValueError('Offset out of range: %s' % whole) from None
    return t


def get_unit_string(s: str) -> str:
    """The timedelta unit named by a graphite unit prefix (``min`` before ``mon``)."""
    if s.startswith('s'):
        return 'seconds'
    if s.startswith('min'):
        return 'minutes'
    if s.startswith('h'):
        return 'hours'
    if s.startswith('d'):
        return 'days'
    if s.startswith('w'):
        return 'weeks'
    if s.startswith('mon'):
        return 'months'
    if s.startswith('y'):
        return 'years'
    raise ValueError("Invalid offset unit '%s'" % s)


parseATTime = parse_at_time  # graphite-web's name
