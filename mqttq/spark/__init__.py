"""The data pipeline on PySpark (the optional `spark` extra; the broker never imports it).

- `session`: the one SparkSession builder (master, quiet logs, Maven packages, `--conf`),
  JDBC options from a PostgreSQL URL, and Spark's failures as one line;
- `progress`: Spark's stage progress (`statusTracker`) as a rich progress bar.
"""

from __future__ import annotations
