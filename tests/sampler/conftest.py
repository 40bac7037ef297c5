"""The sampler tests borrow the cluster tests' `nodes` fixture (real Kafka, Redis and
`mqttq serve` nodes) for the two-node history."""

from __future__ import annotations

from tests.cluster.conftest import nodes

__all__ = ["nodes"]
