"""The blocked-clients tests use the cluster tests' `nodes` fixture (two `mqttq serve`
nodes on one Kafka and one Redis) for the two-node case."""

from __future__ import annotations

from tests.cluster.conftest import nodes

__all__ = ["nodes"]
