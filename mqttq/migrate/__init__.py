"""`mqttq migrate`: TBMQ 1.x's PostgreSQL DEVICE sessions -> the Redis layout of TBMQ 2.x.

Modules, in the order a row goes through them:
- `schema`: the source tables (seed 000, section 2.2) and the queries that read them;
- `source`: PostgreSQL, streamed from server-side cursors in one snapshot;
- `stream`: rows grouped per client (only the newest `limit` rows of one client are held);
- `validate`: what is wrong with a row, and the MQTT 5 part of its JSON (codec_json's form);
- `plan`: one client's entries (the hot loop: rows -> the write script's two strings),
  counters, expired/trimmed counts, or why it is rejected;
- `batches`: planned clients written in pipelined batches, settled in order;
- `redis_writer`: one atomic Lua call per client (`lua/migrate_client.lua`), pipelined;
- `state`: per-client markers and the checkpoint (resume, repeat = no-op);
- `sessions`: the broker's SQLite session records (--sessions-to);
- `rejects`: every rejected row in a CSV or Parquet file (--rejects);
- `verify`: both sides compared client by client;
- `options`, `runner`: the run itself; `report`: its counts.

`plan`, `validate`, `batches`, `redis_writer`, `state`, `options` and `report` import no
PostgreSQL driver: a Spark executor (`mqttq.spark.migrate_job`) plans and writes with them.
The names below are loaded on first use, so importing one of those modules does not load
`runner` (and psycopg) through this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mqttq.migrate.errors import MigrateError
    from mqttq.migrate.options import (
        DEFAULT_BATCH_SIZE,
        DEFAULT_LIMIT,
        DEFAULT_TTL,
        MigrationOptions,
    )
    from mqttq.migrate.redis_writer import OnConflict
    from mqttq.migrate.report import MigrationReport, VerifyReport
    from mqttq.migrate.runner import (
        Migration,
        NoProgress,
        ProgressSink,
        init_source,
        migrate,
    )

_HOMES = {
    "MigrateError": "errors",
    "DEFAULT_BATCH_SIZE": "options",
    "DEFAULT_LIMIT": "options",
    "DEFAULT_TTL": "options",
    "MigrationOptions": "options",
    "OnConflict": "redis_writer",
    "MigrationReport": "report",
    "VerifyReport": "report",
    "Migration": "runner",
    "NoProgress": "runner",
    "ProgressSink": "runner",
    "init_source": "runner",
    "migrate": "runner",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


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
