"""What makes a migration resumable and repeatable: per-client markers and a checkpoint.

The choice (documented in `mqttq migrate pg-to-redis --help`):

- Every client written by a migration gets a marker key, `{client_id}_migrated`, set by the
  same Lua script that writes its queue, so a client is either fully written and marked or
  not written at all. A client whose marker exists is never written again ("already"
  migrated), whatever --on-conflict says: a second full run writes nothing, and a resumed run
  cannot duplicate a client written just before an interruption. Markers have no TTL and
  the broker ignores them (`mqttq session rm` leaves them too); delete them to migrate a
  client again.
- A checkpoint key, one per source database and --clients pattern, records the last client
  of the last batch that was fully written (and whether the run finished). --resume starts
  reading PostgreSQL after it, so a resumed run does not re-read the rows of the clients
  done before; the clients after the checkpoint that were written before the interruption
  are recognised by their markers.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any, Final

MARKER_SUFFIX: Final = "_migrated"
CHECKPOINT_PREFIX: Final = "mqttq:migrate:checkpoint:"

MESSAGES_PHASE: Final = "messages"
"""Clients with message rows, by client id."""
SESSIONS_PHASE: Final = "sessions"
"""Then clients with only a device_session_ctx row, by client id."""


def marker_key(prefix: str, client_id: str) -> str:
    """`<prefix>{<client_id>}_migrated`: in the client's slot, next to its queue."""
    return f"{prefix}{{{client_id}}}{MARKER_SUFFIX}"


def marker_value(run_id: str, messages: int) -> str:
    """What a marker holds: which run wrote the client, when, how many messages."""
    return json.dumps(
        {
            "source": "tbmq1-postgresql",
            "run": run_id,
            "at": int(time.time() * 1000),
            "messages": messages,
        },
        separators=(",", ":"),
    )


def checkpoint_key(prefix: str, source_identity: str, pattern: str | None) -> str:
    """The checkpoint's key for one source database and --clients pattern."""
    digest = hashlib.sha256(f"{source_identity}\0{pattern or ''}".encode()).hexdigest()[:16]
    return f"{prefix}{CHECKPOINT_PREFIX}{digest}"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Every client up to `client_id` (in `phase`, in PostgreSQL's order) is done."""

    phase: str
    client_id: str | None
    """None: the phase has not written anything yet."""
    finished: bool = False
    run_id: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "phase": self.phase,
                "client_id": self.client_id,
                "finished": self.finished,
                "run": self.run_id,
                "at": int(time.time() * 1000),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Checkpoint | None:
        """The checkpoint in `text`; None when it is not one (then it is ignored)."""
        try:
            data: Any = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("phase") not in (MESSAGES_PHASE, SESSIONS_PHASE):
            return None
        client_id = data.get("client_id")
        if client_id is not None and not isinstance(client_id, str):
            return None
        return cls(data["phase"], client_id, bool(data.get("finished")), str(data.get("run", "")))
