"""Time expressions: every form graphite-web accepts, with time zones and DST."""

from __future__ import annotations

from datetime import UTC as UTC_TZ, datetime, timedelta

import pytest

from webapp.render.attime import (epoch, get_timezone, localize, parse_at_time,
                                  parse_time_offset)

UTC = get_timezone('UTC')
NY = get_timezone('America/New_York')
# Wednesday 2021-03-10 15:42:17 UTC
NOW = datetime(2021, 3, 10, 15, 42, 17, tzinfo=UTC_TZ).astimezone(UTC)


def at(expr: str, tz=UTC, now=NOW) -> datetime:
    return parse_at_time(expr, tz, now)


@pytest.mark.parametrize('expr, delta', [
    ('-6h', timedelta(hours=-6)), ('-1d', timedelta(days=-1)), ('-5min', timedelta(minutes=-5)),
    ('-5minutes', timedelta(minutes=-5)), ('-30s', timedelta(seconds=-30)),
    ('-30sec', timedelta(seconds=-30)), ('-30seconds', timedelta(seconds=-30)),
    ('-2weeks', timedelta(weeks=-2)), ('-2w', timedelta(weeks=-2)),
    ('-1mon', timedelta(days=-30)), ('-3months', timedelta(days=-90)),
    ('-1y', timedelta(days=-365)), ('-2years', timedelta(days=-730)),
    ('-1hours', timedelta(hours=-1)), ('-1d2h', timedelta(days=-1, hours=-2)),
    ('+1h', timedelta(hours=1)), ('now-1d', timedelta(days=-1)),
    ('now+30min', timedelta(minutes=30)),
    ('now', timedelta(0)), ('', timedelta(0)), ('NOW', timedelta(0)),
])
def test_relative(expr: str, delta: timedelta) -> None:
    assert at(expr) == NOW + delta


def test_epoch_seconds_and_yyyymmdd() -> None:
    assert epoch(at('1600000000')) == 1600000000
    assert at('20200115') == datetime(2020, 1, 15, tzinfo=UTC_TZ)
    # 8 digits that are not a plausible date are a timestamp
    assert epoch(at('19000101')) == 19000101


@pytest.mark.parametrize('expr, expected', [
    ('12:30_20200115', datetime(2020, 1, 15, 12, 30)),
    ('04:00_20200115', datetime(2020, 1, 15, 4, 0)),
    ('3:15pm_20200115', datetime(2020, 1, 15, 15, 15)),
    ('01/15/20', datetime(2020, 1, 15)), ('01/15/2020', datetime(2020, 1, 15)),
    ('12/31/99', datetime(1999, 12, 31)),
    ('midnight', datetime(2021, 3, 10, 0, 0)), ('noon', datetime(2021, 3, 10, 12, 0)),
    ('teatime', datetime(2021, 3, 10, 16, 0)),
    ('today', datetime(2021, 3, 10)), ('yesterday', datetime(2021, 3, 9)),
    ('tomorrow', datetime(2021, 3, 11)), ('midnight yesterday', datetime(2021, 3, 9)),
    ('noon tomorrow', datetime(2021, 3, 11, 12)), ('6pm today', datetime(2021, 3, 10, 18)),
    ('9am', datetime(2021, 3, 10, 9)), ('noon+2h', datetime(2021, 3, 10, 14)),
    ('midnight-1d', datetime(2021, 3, 9)), ('jan 5', datetime(2021, 1, 5)),
    ('february 14', datetime(2021, 2, 14)), ('monday', datetime(2021, 3, 8)),
    ('wednesday', datetime(2021, 3, 10)), ('thursday', datetime(2021, 3, 4)),
    ('20200115+1d', datetime(2020, 1, 16)),
])
def test_absolute_references(expr: str, expected: datetime) -> None:
    assert at(expr) == expected.replace(tzinfo=UTC_TZ)


def test_time_zone_applies_to_references() -> None:
    # noon in New York on 2021-01-15 is 17:00 UTC (EST)
    result = at('12:00_20210115', tz=NY)
    assert result.utcoffset() == timedelta(hours=-5)
    assert epoch(result) == epoch(datetime(2021, 1, 15, 17, tzinfo=UTC_TZ))
    # midnight is midnight in the zone of the request
    now = datetime(2021, 7, 1, 3, 0, tzinfo=UTC_TZ)  # 23:00 EDT on June 30
    assert at('midnight', tz=NY, now=now) == datetime(2021, 6, 30, 4, tzinfo=UTC_TZ)


def test_offsets_are_absolute_across_dst() -> None:
    # DST starts 2021-03-14 02:00 in New York; 24 hours after 01:00 EST is 02:00 EDT
    start = localize(datetime(2021, 3, 14, 1, 0), NY)
    result = at('+1d', tz=NY, now=start)
    assert epoch(result) - epoch(start) == 86400
    assert (result.day, result.hour, result.utcoffset()) == (15, 2, timedelta(hours=-4))


def test_ambiguous_and_missing_local_times_resolve_like_pytz() -> None:
    ambiguous = localize(datetime(2021, 11, 7, 1, 30), NY)  # happens twice
    assert ambiguous.utcoffset() == timedelta(hours=-5)  # standard time (is_dst=False)
    missing = localize(datetime(2021, 3, 14, 2, 30), NY)  # never happens
    assert epoch(missing) == epoch(datetime(2021, 3, 14, 7, 30, tzinfo=UTC_TZ))


def test_datetime_input_and_now_string() -> None:
    assert parse_at_time(NOW, NY) == NOW
    assert parse_at_time(datetime(2020, 1, 1), UTC) == datetime(2020, 1, 1, tzinfo=UTC_TZ)
    assert epoch(parse_at_time('-1h', UTC, '1600000000')) == 1600000000 - 3600


@pytest.mark.parametrize('expr', ['garbage', '-1x', '-d', 'foo-1d', '13/45/2020', '1:2x',
                                  'jan', '99999999999999999999', '-99999999999y', '2020-01-01'])
def test_bad_expressions_raise_value_error(expr: str) -> None:
    with pytest.raises(ValueError):
        at(expr)


def test_offset_units() -> None:
    assert parse_time_offset('5min') == timedelta(minutes=5)
    assert parse_time_offset('-1mon') == timedelta(days=-30)
    with pytest.raises(ValueError):
        parse_time_offset('-1m')  # graphite rejects the bare "m"


def test_unknown_zone() -> None:
    with pytest.raises(ValueError):
        get_timezone('Mars/Olympus')
