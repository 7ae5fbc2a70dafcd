"""When an automation is due: its cron expression read in its time zone, computed by croniter.

Expressions are what Foya's parser (robfig/cron `ParseStandard`) takes: five fields (minute,
hour, day of month, month, day of week; lists, ranges, steps, names such as `MON` and `JAN`),
or `@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight`, `@hourly`. Day of month
and day of week both restricted means either, as in cron. Refused: a seconds or a year field,
`@every <duration>`, and an expression that matches no date (`0 0 30 2 *`).

Time zones are IANA names (`Europe/Berlin`, `UTC`), or `Local`: the host's zone (`TZ`, else
`/etc/localtime`, else UTC), which is also what an empty timezone means, as in Foya.

Daylight saving time, in the automation's zone:

- A local time a spring-forward skips (02:30 on the night Berlin goes from 02:00 to 03:00) runs
  once that day, at the first minute after the gap (03:00 local): croniter's shift.
- A local time a fall-back repeats (02:30 on the night Berlin goes from 03:00 back to 02:00) runs
  once, at its first occurrence. Expressions whose hour field covers every hour (`*/5 * * * *`,
  `@hourly`) run in both of those hours: they pace elapsed time, and both hours are real.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
from typing import Any
from zoneinfo import ZoneInfo

from app.kernel.automations.errors import InvalidAutomation

LOCAL = "Local"
DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
#: Repeated local times skipped in a row at most: one fall-back night at a time.
MAX_SKIPS = 8


def zone(name: str) -> dt.tzinfo:
    """The time zone called `name` (`Local` is the host's); `InvalidAutomation` if unknown."""
    if name == LOCAL:
        return _local_zone()
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        raise InvalidAutomation(f"timezone: unknown time zone {name!r}") from None


@functools.cache
def _local_zone() -> dt.tzinfo:
    name = os.environ.get("TZ", "").lstrip(":")
    if name:
        try:
            return ZoneInfo(name)
        except (KeyError, ValueError, OSError):
            pass
    try:
        with open("/etc/localtime", "rb") as f:
            return ZoneInfo.from_file(f, key=LOCAL)
    except (OSError, ValueError):
        return dt.UTC


class Schedule:
    """A parsed expression in its zone; `next_after` gives its due times."""

    def __init__(self, cron: str, timezone: str) -> None:
        """Parse `cron` (trimmed) for `timezone` (trimmed; empty means `Local`);
        `InvalidAutomation` if either is not valid or the expression never fires."""
        if not cron:
            raise InvalidAutomation("cron: required")
        expression = DESCRIPTORS.get(cron, cron)
        if cron.startswith("@") and cron not in DESCRIPTORS:
            raise InvalidAutomation(
                f"cron: unknown descriptor {cron!r} (use one of {', '.join(DESCRIPTORS)})"
            )
        if len(expression.split()) != 5:
            raise InvalidAutomation(
                "cron: five fields are needed (minute hour day-of-month month day-of-week)"
            )
        self.zone = zone(timezone or LOCAL)
        # Imported here: a kernel without automations does not pay croniter's ~20 ms.
        from croniter import CroniterError, croniter  # type: ignore[import-untyped]

        try:
            self._iter: Any = croniter(expression, dt.datetime.now(self.zone))
        except CroniterError as exc:
            raise InvalidAutomation(f"cron: {exc}") from None
        except (ValueError, TypeError, KeyError, IndexError):  # croniter's own slips
            raise InvalidAutomation(f"cron: {cron!r} is not a valid expression") from None
        hours = self._iter.expanded[1]
        self._every_hour = hours == ["*"] or len(set(hours)) == 24
        if self.next_after(dt.datetime.now(dt.UTC)) is None:
            raise InvalidAutomation(f"cron: {cron!r} matches no date")

    def next_after(self, instant: dt.datetime) -> dt.datetime | None:
        """The first due time strictly after `instant` (aware), in UTC; None if there is none
        within croniter's search window (50 years)."""
        from croniter import CroniterBadDateError

        start = instant.astimezone(self.zone)
        for _ in range(MAX_SKIPS):
            try:
                local: dt.datetime = self._iter.get_next(dt.datetime, start_time=start)
            except CroniterBadDateError:
                return None
            if self._every_hour or not _repeated(local):
                return local.astimezone(dt.UTC)
            start = local
        return None


@functools.lru_cache(maxsize=4096)
def schedule_of(cron: str, timezone: str) -> Schedule:
    """The parsed `Schedule`, shared by automations with the same expression and zone (a
    schedule keeps no state between calls); `InvalidAutomation` as `Schedule` raises it."""
    return Schedule(cron, timezone)


def _repeated(local: dt.datetime) -> bool:
    """`local` is the second occurrence of a wall time that a fall-back repeats."""
    first, second = local.replace(fold=0), local.replace(fold=1)
    return first.utcoffset() != second.utcoffset() and local.utcoffset() == second.utcoffset()
