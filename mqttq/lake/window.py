"""A time window [since, until) in UTC, as `--since` and `--until` give it (reports, replay).

Imports neither pyspark nor pyarrow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

__all__ = ["Window", "parse_moment", "parse_window"]

_DURATION: Final = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d|w)$")
_UNIT: Final = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
DEFAULT_SPAN: Final = timedelta(hours=24)


@dataclass(frozen=True)
class Window:
    """[since, until) in UTC; `previous_since` starts the window before it, of the same
    length (the silent devices are those of that window)."""

    since: datetime
    until: datetime

    @property
    def hours(self) -> float:
        """The window's length in hours."""
        return (self.until - self.since).total_seconds() / 3600

    @property
    def previous_since(self) -> datetime:
        return self.since - (self.until - self.since)

    @staticmethod
    def micros(moment: datetime) -> int:
        """`moment` as microseconds since the epoch."""
        delta = moment - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds

    def dates(self, start: datetime) -> tuple[str, str]:
        """The first and last `date` partitions (YYYY-MM-DD) from `start` to `until`."""
        last = self.until - timedelta(microseconds=1)
        return start.strftime("%Y-%m-%d"), last.strftime("%Y-%m-%d")


def _duration(text: str) -> timedelta | None:
    match = _DURATION.match(text)
    if match is None:
        return None
    return timedelta(seconds=float(match.group(1)) * _UNIT[match.group(2)])


def parse_moment(text: str, option: str) -> datetime:
    """An ISO 8601 time or date (UTC unless it names an offset); ValueError naming
    `option` otherwise."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"bad {option} {text!r}: expected an ISO 8601 time such as 2026-11-27T10:00Z, "
            "a date, or a duration such as 24h"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def parse_window(since: str | None, until: str | None, now: datetime | None = None) -> Window:
    """The window of `--since` and `--until`: `until` defaults to `now`; `since` to 24 h
    before `until`, and may be a duration before it (`7d`). ValueError (one line naming
    the option) for a bad value or an empty window."""
    end = parse_moment(until, "--until") if until else (now or datetime.now(UTC))
    if since is None:
        start = end - DEFAULT_SPAN
    else:
        span = _duration(since.strip())
        start = end - span if span is not None else parse_moment(since, "--since")
    if start >= end:
        raise ValueError(
            f"empty window: --since {start:%Y-%m-%dT%H:%M:%SZ} is not before --until "
            f"{end:%Y-%m-%dT%H:%M:%SZ}; give a --since before --until"
        )
    return Window(start, end)
