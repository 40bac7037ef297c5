"""The data pipeline on PySpark (the optional `spark` extra; the broker never imports it).

- `session`: the one SparkSession builder (master, quiet logs, Maven packages, `--conf`),
  JDBC options from a PostgreSQL URL, and Spark's failures as one line;
- `progress`: Spark's stage progress (`statusTracker`) as a rich progress bar;
- `migrate_source`, `migrate_partition`, `migrate_job`: `mqttq migrate pg-to-redis
  --engine spark` (the source split by client hash; each partition planned and written by
  the local engine's code on an executor; the driver's run and report).
"""

from __future__ import annotations
