"""The five-field cron parser and iterator (runtime/triggers/cron.py): fields, the
day-of-month/day-of-week OR, and both DST edges in an IANA zone."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from runtime.errors import InvalidCron, InvalidTimezone
from runtime.triggers.cron import parse, zone

NY = ZoneInfo("America/New_York")


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    "expr, after, expected",
    [
        ("* * * * *", utc(2026, 1, 1, 0, 0, 30), utc(2026, 1, 1, 0, 1)),
        ("*/15 * * * *", utc(2026, 1, 1, 0, 1), utc(2026, 1, 1, 0, 15)),
        ("0 9 * * mon-fri", utc(2026, 1, 2, 9, 0), utc(2026, 1, 5, 9, 0)),  # Friday 09:00 -> Monday
        ("30 4 1,15 * *", utc(2026, 1, 2), utc(2026, 1, 15, 4, 30)),
        ("0 0 29 2 *", utc(2026, 1, 1), utc(2028, 2, 29)),  # the next leap day
        ("0 0 1 jan *", utc(2026, 6, 1), utc(2027, 1, 1)),
        ("0 12 * * 7", utc(2026, 1, 1), utc(2026, 1, 4, 12)),  # 7 is Sunday
        ("0 0 13 * 5", utc(2026, 2, 1), utc(2026, 2, 6)),  # day 13 OR a Friday: Friday 6th first
        ("5-10/5 1 * * *", utc(2026, 1, 1, 1, 5), utc(2026, 1, 1, 1, 10)),
    ],
)
def test_next_after_finds_the_first_tick_strictly_later(expr, after, expected):
    assert parse(expr).next_after(after, ZoneInfo("UTC")) == expected


def test_a_wall_time_the_spring_gap_skips_fires_once_just_past_the_gap():
    # 2026-03-08: New York jumps from 02:00 EST to 03:00 EDT; 02:30 does not exist.
    fires = parse("30 2 * * *").upcoming(datetime(2026, 3, 7, 12, tzinfo=NY), NY, 2)
    assert [f.astimezone(NY).strftime("%d %H:%M %Z") for f in fires] == ["08 03:30 EDT", "09 02:30 EDT"]


def test_a_repeated_wall_time_in_the_fall_fires_once():
    # 2026-11-01: 01:30 happens twice in New York (EDT, then EST).
    fires = parse("30 1 * * *").upcoming(datetime(2026, 10, 31, 12, tzinfo=NY), NY, 2)
    assert [f.astimezone(NY).strftime("%d %H:%M %Z") for f in fires] == ["01 01:30 EDT", "02 01:30 EST"]


def test_nine_in_the_morning_stays_nine_across_a_dst_change():
    fires = parse("0 9 * * *").upcoming(datetime(2026, 3, 6, 12, tzinfo=NY), NY, 3)
    assert [f.astimezone(NY).hour for f in fires] == [9, 9, 9]
    assert [f.hour for f in fires] == [14, 13, 13]  # UTC moves, the wall clock does not


def test_every_minute_through_the_gap_never_repeats_an_instant():
    fires = parse("* * * * *").upcoming(datetime(2026, 3, 8, 1, 58, tzinfo=NY), NY, 5)
    assert len(set(fires)) == 5 and fires == sorted(fires)
    assert fires[1].astimezone(NY).strftime("%H:%M %Z") == "03:00 EDT"


def test_a_date_that_never_comes_has_no_next_tick():
    assert parse("0 0 30 2 *").next_after(utc(2026, 1, 1), ZoneInfo("UTC")) is None


@pytest.mark.parametrize(
    "expr",
    [
        "",
        "* * * *",
        "* * * * * *",
        "60 * * * *",
        "* 24 * * *",
        "* * 0 * *",
        "* * * 13 *",
        "* * * * 8",
        "5-1 * * * *",
        "*/0 * * * *",
        "a * * * *",
        "١ * * * *",
        "x" * 500,
        None,
        5,
    ],
)
def test_a_malformed_expression_is_refused_with_invalid_cron(expr):
    with pytest.raises(InvalidCron):
        parse(expr)


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../etc/passwd", "/etc/localtime", None, "x" * 100])
def test_an_unknown_timezone_is_refused(name):
    with pytest.raises(InvalidTimezone):
        zone(name)
