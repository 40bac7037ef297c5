"""One way to open the small SQLite files beside the broker's (auth.db's credentials, admin
users and blocked clients, the integrations' table): WAL, every commit synced, autocommit
(the stores run their own transactions), usable from the thread the store hands it to."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

__all__ = ["open_durable"]


def open_durable(
    path: Path, schema: Iterable[str] = (), *, busy_timeout_ms: int | None = None
) -> sqlite3.Connection:
    """The file at `path` (its directory created if needed) open with `schema`'s statements
    run; with `busy_timeout_ms`, a writer waits that long for another process's lock (a
    CLI beside the running broker). Raises sqlite3.Error or OSError, the connection closed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if busy_timeout_ms is None:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    else:
        conn = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000
        )
    try:
        if busy_timeout_ms is not None:
            conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        for statement in schema:
            conn.execute(statement)
    except BaseException:
        conn.close()
        raise
    return conn
