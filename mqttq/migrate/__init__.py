"""`mqttq migrate`: TBMQ 1.x's PostgreSQL DEVICE sessions -> the Redis layout of TBMQ 2.x.

Modules, in the order a row goes through them:
- `schema`: the source tables (seed 000, section 2.2) and the queries that read them;
- `source`: PostgreSQL, streamed from server-side cursors in one snapshot;
- `stream`: rows grouped per client (only the newest `limit` rows of one client are held);
- `validate`: what is wrong with a row, and the MQTT 5 part of its JSON (codec_json's form);
- `plan`: one client's entries (the hot loop: rows -> the write script's two strings),
  counters, expired/trimmed counts, or why it is rejected;
- `redis_writer`: one atomic Lua call per client (`lua/migrate_client.lua`), pipelined;
- `state`: per-client markers and the checkpoint (resume, repeat = no-op);
- `sessions`: the broker's SQLite session records (--sessions-to);
- `verify`: both sides compared client by client;
- `runner`: the run itself; `report`: its counts.
"""

from __future__ import annotations

from mqttq.migrate.errors import MigrateError
from mqttq.migrate.redis_writer import OnConflict
from mqttq.migrate.report import MigrationReport, VerifyReport
from mqttq.migrate.runner import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_LIMIT,
    DEFAULT_TTL,
    Migration,
    MigrationOptions,
    NoProgress,
    ProgressSink,
    init_source,
    migrate,
)

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_LIMIT",
    "DEFAULT_TTL",
    "MigrateError",
    "Migration",
    "MigrationOptions",
    "MigrationReport",
    "NoProgress",
    "OnConflict",
    "ProgressSink",
    "VerifyReport",
    "init_source",
    "migrate",
]
