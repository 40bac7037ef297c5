"""Counters the broker keeps, read by `Broker.statistics()` and the admin API's /metrics."""

from __future__ import annotations

from mqttq.broker.delivery.latency import LatencyHistograms

__all__ = ["BrokerStats"]


class BrokerStats:
    """Plain integer counters; per-QoS counters are lists indexed by QoS 0..2."""

    __slots__ = (
        "connections_total",
        "dropped",
        "log_produce_failures",
        "messages_in",
        "messages_out",
        "protocol_errors",
        "storage_errors",
        "storage_latency",
    )

    def __init__(self) -> None:
        self.connections_total = 0
        self.protocol_errors = 0
        self.storage_errors = 0
        self.log_produce_failures = 0
        """PUBLISHes the message log did not confirm (the publisher was refused)."""
        self.messages_in = [0, 0, 0]
        """PUBLISHes received from clients (wills included), by QoS."""
        self.messages_out = [0, 0, 0]
        """PUBLISHes sent to clients (re-sends included), by QoS."""
        self.dropped = [0, 0, 0]
        """Deliveries dropped: QoS 0 to offline/paused clients, queue overflow, by QoS."""
        self.storage_latency = LatencyHistograms()
        """Duration of each storage write and read, by operation."""
