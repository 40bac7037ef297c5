"""CountLimit: a count of held resources (connections, sessions, topics) with a limit.

A count limit refuses at once: waiting does not free a resource someone else holds.
"""

from __future__ import annotations

__all__ = ["CountLimit"]


def _check(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be an integer >= 0, got {limit!r}")


class CountLimit:
    """`count` resources held out of `limit`. `try_acquire` admits only while
    `count + others < limit`, so the count never reaches `limit + 1` through it (RobustMQ
    compares with `>` and lets one past); `force_acquire` counts past the limit (state
    restored at start must be counted, never dropped); `count` never goes below 0.

    `others`: what the other nodes of a cluster hold of the same limit (0 on a lone node;
    set from their heartbeats in Redis), so that a tenant's limit counts cluster-wide."""

    __slots__ = ("count", "limit", "others")

    count: int
    limit: int
    others: int

    def __init__(self, limit: int) -> None:
        _check(limit)
        self.limit = limit
        self.count = 0
        self.others = 0

    def try_acquire(self) -> bool:
        """Hold one more if `count + others < limit` (True); else change nothing (False)."""
        if self.count + self.others < self.limit:
            self.count += 1
            return True
        return False

    def force_acquire(self) -> None:
        """Hold one more even at or past the limit."""
        self.count += 1

    def release(self) -> None:
        """Give one back (a release with nothing held is ignored)."""
        if self.count > 0:
            self.count -= 1

    def set_limit(self, limit: int) -> None:
        """A new limit, effective at once. Lowered below `count`, the holders keep their
        resources and new acquires are refused until the count is below it again.
        Raises ValueError for a negative or non-integer limit (nothing changes)."""
        _check(limit)
        self.limit = limit

    def __repr__(self) -> str:
        return f"CountLimit(count={self.count}, others={self.others}, limit={self.limit})"
