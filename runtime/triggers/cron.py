"""A small five-field cron expression: parse it once, then ask for the next fire time.

`minute hour day-of-month month day-of-week`, each field `*`, a number, a range `a-b`,
a step `*/n` or `a-b/n`, or a comma list of those; month and weekday names (jan, mon) are
accepted; weekday 0 and 7 are both Sunday. As in Vixie cron, when both day-of-month and
day-of-week are restricted a day matches if EITHER does.

Times are wall-clock times in the schedule's IANA timezone (zoneinfo), so `0 9 * * *`
is nine in the morning on both sides of a DST change. The two DST edges:
- a wall time the spring-forward gap skips (02:30 in New York) fires at the same offset
  past the transition (03:30 local), once;
- a wall time the fall-back repeats (01:30) fires once, at its first occurrence.
Fire times are strictly increasing instants, so no instant ever fires twice.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from runtime.errors import InvalidCron, InvalidTimezone

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_DAYS = {name: i for i, name in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
# (name, low, high, names)
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
# A search that finds nothing within this many years means the expression never fires
# (`0 0 30 2 *`): refused when the schedule is made, not discovered at 3 a.m.
SEARCH_YEARS = 5


@dataclass(frozen=True)
class Cron:
    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    days_restricted: bool
    weekdays_restricted: bool

    def _day_matches(self, d: datetime) -> bool:
        dom = d.day in self.days
        dow = (d.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return dom or dow
        return dom and dow

    def next_after(self, after: datetime, tz: ZoneInfo) -> datetime | None:
        """The first fire time strictly after `after` (an aware datetime), in UTC, or None
        if there is none within SEARCH_YEARS."""
        after_utc = after.astimezone(UTC)
        # Start at the next whole wall-clock minute after `after`, in the zone.
        wall = after_utc.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0) + timedelta(minutes=1)
        limit = wall + timedelta(days=366 * SEARCH_YEARS)
        while wall < limit:
            if wall.month not in self.months:
                year, month = (wall.year + 1, 1) if wall.month == 12 else (wall.year, wall.month + 1)
                wall = datetime(year, month, 1)
                continue
            if not self._day_matches(wall):
                wall = datetime(wall.year, wall.month, wall.day) + timedelta(days=1)
                continue
            if wall.hour not in self.hours:
                wall = datetime(wall.year, wall.month, wall.day, wall.hour) + timedelta(hours=1)
                continue
            if wall.minute not in self.minutes:
                wall += timedelta(minutes=1)
                continue
            # fold=0: a repeated wall time means its first occurrence; a skipped one maps
            # past the gap. Either may land at or before `after` (the second 01:30, or a
            # gap time mapped onto a wall time that already fired): keep looking.
            instant = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
            if instant > after_utc:
                return instant
            wall += timedelta(minutes=1)
        return None

    def upcoming(self, after: datetime, tz: ZoneInfo, count: int) -> list[datetime]:
        out: list[datetime] = []
        while len(out) < count:
            found = self.next_after(after, tz)
            if found is None:
                break
            out.append(found)
            after = found
        return out


def parse(text) -> Cron:
    if not isinstance(text, str) or len(text) > 200:
        raise InvalidCron("cron must be text of at most 200 characters", field="cron")
    parts = text.split()
    if len(parts) != 5:
        raise InvalidCron(
            f"cron needs five fields (minute hour day-of-month month day-of-week), got {len(parts)}", field="cron"
        )
    sets = []
    for part, (name, low, high, names) in zip(parts, _FIELDS, strict=True):
        sets.append(_field(part, name, low, high, names))
    weekdays = frozenset(d % 7 for d in sets[4])  # 7 is Sunday too
    cron = Cron(
        text=" ".join(parts),
        minutes=sets[0],
        hours=sets[1],
        days=sets[2],
        months=sets[3],
        weekdays=weekdays,
        days_restricted=not parts[2].startswith("*"),
        weekdays_restricted=not parts[4].startswith("*"),
    )
    return cron


def _field(part: str, name: str, low: int, high: int, names: dict) -> frozenset[int]:
    values: set[int] = set()
    for item in part.split(","):
        rng, _, step_text = item.partition("/")
        step = 1
        if step_text:
            step = _number(step_text, name, 1, high - low + 1, {})
        if rng == "*":
            start, end = low, high
        elif "-" in rng:
            a, _, b = rng.partition("-")
            start, end = _number(a, name, low, high, names), _number(b, name, low, high, names)
            if start > end:
                raise InvalidCron(f"cron {name}: range {rng!r} runs backwards", field="cron")
        else:
            start = _number(rng, name, low, high, names)
            end = high if step_text else start
        values.update(range(start, end + 1, step))
    return frozenset(values)


def _number(text: str, name: str, low: int, high: int, names: dict) -> int:
    value = names.get(text.lower())
    if value is None:
        if not text.isascii() or not text.isdigit():
            raise InvalidCron(f"cron {name}: {text[:20]!r} is not a number", field="cron")
        value = int(text)
    if not low <= value <= high:
        raise InvalidCron(f"cron {name}: {value} is outside {low}-{high}", field="cron")
    return value


def zone(name) -> ZoneInfo:
    if not isinstance(name, str) or not 0 < len(name) <= 64 or name.startswith(("/", ".")) or ".." in name:
        raise InvalidTimezone("timezone must be an IANA name such as Europe/Paris", field="timezone")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidTimezone(
            f"unknown timezone {name!r}: use an IANA name such as Europe/Paris", field="timezone"
        ) from None
