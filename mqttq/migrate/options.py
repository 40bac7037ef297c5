"""What `mqttq migrate pg-to-redis` can be told, whichever engine runs it.

No I/O and no database driver here: the options travel to Spark executors (pickled), which
plan and write clients but never talk to PostgreSQL themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from mqttq.codec.enums import SESSION_EXPIRY_NEVER
from mqttq.migrate.redis_writer import OnConflict
from mqttq.migrate.validate import MAX_PACKET_ID

DEFAULT_LIMIT: Final = 10_000
"""TBMQ's and mqttq's default per-client queue limit (mqtt.max_queued_messages)."""
DEFAULT_TTL: Final = 604_800
"""Seconds a message without an expiry interval lives (TBMQ's default, 7 days)."""
DEFAULT_BATCH_SIZE: Final = 10_000


@dataclass(frozen=True, slots=True)
class MigrationOptions:
    """Everything `mqttq migrate pg-to-redis` can be told."""

    pg_url: str
    redis_url: str
    cluster: bool = False
    key_prefix: str = ""
    limit: int = DEFAULT_LIMIT
    default_ttl: int = DEFAULT_TTL
    clients: str | None = None
    """SQL LIKE pattern on client ids (`%` any run, `_` one character, `\\` escapes)."""
    batch_size: int = DEFAULT_BATCH_SIZE
    on_conflict: OnConflict = OnConflict.FAIL
    dry_run: bool = False
    verify: bool = False
    resume: bool = False
    sessions_db: Path | None = None
    """The broker's SQLite file to add session records to (None: none)."""
    session_expiry_interval: int = SESSION_EXPIRY_NEVER
    rejects_path: Path | None = None
    """Where to write every rejected row's problem (CSV, or Parquet by suffix)."""

    def check(self) -> None:
        """ValueError naming the option that is out of range."""
        if not 1 <= self.limit <= MAX_PACKET_ID:
            raise ValueError(
                f"--limit {self.limit}: the persisted messages limit must be 1..65535 "
                "(one queue holds each MQTT packet id at most once)"
            )
        if self.default_ttl < 1:
            raise ValueError(f"--default-ttl {self.default_ttl}: must be at least 1 second")
        if self.batch_size < 1:
            raise ValueError(f"--batch-size {self.batch_size}: must be at least 1")
        if not 0 <= self.session_expiry_interval <= SESSION_EXPIRY_NEVER:
            raise ValueError(
                f"--session-expiry {self.session_expiry_interval}: must be 0..4294967295"
            )
