"""One module per sink type: http, kafka, postgres, mqtt (the bridge out), lake (Parquet files
in a data lake, docs/lake.md)."""

from __future__ import annotations
