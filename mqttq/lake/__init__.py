"""The data lake (issue 36): the broker's Kafka log as partitioned Parquet, and the jobs
that keep it (`mqttq lake run`, `compact`, `expire`). `mqttq.lake.layout` is the contract
between writers and readers."""

from __future__ import annotations
