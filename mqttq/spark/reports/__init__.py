"""`mqttq report NAME`: reports over TBMQ 1.x's PostgreSQL, the Redis sessions and the
embedded SQLite database, computed on Spark.

Each report is extract (`pg_source`, `redis_source`, `sqlite_source`: rows as DataFrames)
-> transform (pure DataFrame -> DataFrame functions in the report's module, unit-tested on
a small session) -> output (`output`: a rich table, `--json`, `--out DIR`, `--chart PNG`).
The reports: `migration_plan` (before a migration), `sessions` (the queues as they are),
`migration_check` (after a migration). The CLI is `mqttq.cli.report`.
"""

from __future__ import annotations

from mqttq.errors import MqttqError


class ReportError(MqttqError):
    """A report cannot run: a source unreachable, a table missing, a source empty, a bad
    option. The message is one line for the operator; the CLI exits non-zero."""
