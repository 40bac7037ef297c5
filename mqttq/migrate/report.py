"""What a migration did, counted: the summary table and the --json output.

Counts are exact however large the run; the lists (problems, conflicts, differences) keep
the first `MAX_LISTED` items, and say how many there were in all.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

from mqttq.migrate.validate import Problem

MAX_LISTED: Final = 1000
"""Items kept per list in a report (the counts stay exact)."""


@dataclass(slots=True)
class VerifyReport:
    """The comparison of PostgreSQL and Redis, client by client (--verify)."""

    clients_checked: int = 0
    clients_equal: int = 0
    clients_different: int = 0
    clients_not_compared: int = 0
    """Rejected clients, and clients another session holds in Redis (--on-conflict skip)."""
    messages_checked: int = 0
    differences: list[dict[str, str]] = field(default_factory=list)

    def add_difference(self, client_id: str, what: str) -> None:
        self.clients_different += 1
        if len(self.differences) < MAX_LISTED:
            self.differences.append({"client_id": client_id, "difference": what})

    @property
    def ok(self) -> bool:
        return self.clients_different == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "clients_checked": self.clients_checked,
            "clients_equal": self.clients_equal,
            "clients_different": self.clients_different,
            "clients_not_compared": self.clients_not_compared,
            "messages_checked": self.messages_checked,
            "differences": self.differences,
        }


@dataclass(slots=True)
class MigrationReport:
    """Counters of one `pg-to-redis` run (a dry run counts what it would do)."""

    run_id: str
    dry_run: bool = False
    resumed_after: str | None = None
    """The checkpoint a --resume started after ("phase:client id"), if any."""
    already_finished: bool = False
    """--resume found the checkpoint of a finished run: nothing was read."""
    refused: bool = False
    """--on-conflict fail found clients already in Redis: nothing was written."""
    finished: bool = False
    rows_read: int = 0
    clients_seen: int = 0
    clients_migrated: int = 0
    """Written by this run (replaced ones included)."""
    clients_replaced: int = 0
    clients_already: int = 0
    """Written by an earlier run (their marker exists): left as they are."""
    clients_skipped: int = 0
    """Another session holds the id in Redis and --on-conflict skip left it."""
    clients_rejected: int = 0
    messages_migrated: int = 0
    messages_expired: int = 0
    messages_trimmed: int = 0
    messages_not_written: int = 0
    """Live messages of clients rejected, skipped, in conflict or already migrated."""
    rows_rejected: int = 0
    """Rows with at least one problem (a row can have several)."""
    rejected_by_reason: Counter[str] = field(default_factory=Counter)
    problems: list[Problem] = field(default_factory=list)
    problems_total: int = 0
    conflicts: list[str] = field(default_factory=list)
    conflicts_total: int = 0
    sessions_written: int = 0
    sessions_kept: int = 0
    elapsed_s: float = 0.0
    """The migration's time (--verify's comparison not included)."""
    verify: VerifyReport | None = None

    def add_problems(self, problems: list[Problem]) -> None:
        self.clients_rejected += 1
        rows = {p.serial_number for p in problems if p.serial_number is not None}
        self.rows_rejected += len(rows)
        for problem in problems:
            self.rejected_by_reason[problem.reason.value] += 1
            self.problems_total += 1
            if len(self.problems) < MAX_LISTED:
                self.problems.append(problem)

    def add_conflict(self, client_id: str) -> None:
        self.conflicts_total += 1
        if len(self.conflicts) < MAX_LISTED:
            self.conflicts.append(client_id)

    def merge(self, other: MigrationReport) -> None:
        """Add the counts and lists of `other` (a part of the same run, e.g. one Spark
        partition) to this report."""
        for name in _SUMMED:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.rejected_by_reason.update(other.rejected_by_reason)
        self.problems.extend(other.problems[: MAX_LISTED - len(self.problems)])
        self.conflicts.extend(other.conflicts[: MAX_LISTED - len(self.conflicts)])

    @property
    def rows_per_s(self) -> float:
        return self.rows_read / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "dry_run": self.dry_run,
            "resumed_after": self.resumed_after,
            "already_finished": self.already_finished,
            "refused": self.refused,
            "finished": self.finished,
            "rows_read": self.rows_read,
            "clients": {
                "seen": self.clients_seen,
                "migrated": self.clients_migrated,
                "replaced": self.clients_replaced,
                "already_migrated": self.clients_already,
                "skipped": self.clients_skipped,
                "conflicts": self.conflicts_total,
                "rejected": self.clients_rejected,
            },
            "messages": {
                "migrated": self.messages_migrated,
                "skipped_expired": self.messages_expired,
                "trimmed": self.messages_trimmed,
                "not_written": self.messages_not_written,
            },
            "rejected": {
                "rows": self.rows_rejected,
                "problems": self.problems_total,
                "by_reason": dict(sorted(self.rejected_by_reason.items())),
                "listed": [p.to_json() for p in self.problems],
            },
            "conflicts": self.conflicts,
            "sessions": {"written": self.sessions_written, "kept": self.sessions_kept},
            "elapsed_s": round(self.elapsed_s, 3),
            "rows_per_s": round(self.rows_per_s, 1),
            "verify": None if self.verify is None else self.verify.to_json(),
        }


_SUMMED: Final = (
    "rows_read",
    "clients_seen",
    "clients_migrated",
    "clients_replaced",
    "clients_already",
    "clients_skipped",
    "clients_rejected",
    "messages_migrated",
    "messages_expired",
    "messages_trimmed",
    "messages_not_written",
    "rows_rejected",
    "problems_total",
    "conflicts_total",
    "sessions_written",
    "sessions_kept",
)
