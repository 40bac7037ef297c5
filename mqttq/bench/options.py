"""The options of one bench run, validated once, shared by every worker."""

from __future__ import annotations

import os
from dataclasses import dataclass

from mqttq.bench.payload import HEADER_SIZE

DEFAULT_INFLIGHT = 100
DEFAULT_INFLIGHT_311_QOS2 = 20
MANY_CLIENTS = 200
"""From this many clients on, the default is several worker processes."""


class BenchError(Exception):
    """A run cannot go on; the message is one line meant for the user."""


class BenchUsageError(BenchError):
    """An option is invalid: the run was refused before it started (the CLI exits 2)."""


class ConnectFailed(BenchError):
    """The TCP connection or the MQTT CONNECT did not succeed."""


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """Connection, load and timing options common to every scenario."""

    host: str = "127.0.0.1"
    port: int = 1883
    qos: int = 1
    protocol: int = 5
    """4 (MQTT 3.1.1) or 5 (MQTT 5.0): the CONNECT protocol level."""
    payload: int = 64
    rate: float = 0.0
    """Messages per second per publisher; 0 means as fast as the in-flight window allows."""
    duration: float | None = 10.0
    """Seconds of measured publishing; None when `count` bounds the run."""
    count: int | None = None
    """Measured messages per publisher; None when `duration` bounds the run."""
    warmup: float = 0.0
    """Seconds of publishing before the measured phase, excluded from rates and latency."""
    inflight: int | None = None
    """Unacknowledged QoS 1/2 publishes per publisher; None picks `window()`'s default."""
    drain_timeout: float = 10.0
    connect_timeout: float = 10.0
    keep_alive: int = 60
    session_expiry: int = 300
    """Session Expiry Interval (MQTT 5.0) for persistent sessions, in seconds."""
    workers: int = 0
    """Worker processes; 0 picks a default from the number of clients."""
    topic_prefix: str = "mqttq-bench"
    username: str | None = None
    password: str | None = None
    node_ports: tuple[int, ...] = ()
    """Ports of several broker nodes on `host` (replacing `port`): client i of a scenario
    connects to `node_ports[i % n]`, with subscribers one node further on `cross_nodes`."""
    cross_nodes: bool = False
    """With `node_ports`: subscriber i connects to node (i + 1) % n, so that each p2p pair's
    messages cross from one node to another."""

    def port_for(self, index: int, *, subscriber: bool) -> int:
        """The port client `index` (a publisher's or a subscriber's) connects to."""
        if not self.node_ports:
            return self.port
        shift = 1 if subscriber and self.cross_nodes else 0
        return self.node_ports[(index + shift) % len(self.node_ports)]

    def validate(self) -> None:
        """Raise BenchUsageError naming the first bad option."""
        if self.qos not in (0, 1, 2):
            raise BenchUsageError(f"--qos must be 0, 1 or 2, got {self.qos}")
        if self.protocol not in (4, 5):
            raise BenchUsageError(f"--protocol must be 311 or 5, got {self.protocol}")
        if self.payload < HEADER_SIZE:
            raise BenchUsageError(
                f"--payload must be at least {HEADER_SIZE} bytes, got {self.payload}"
            )
        if self.rate < 0:
            raise BenchUsageError(f"--rate must be >= 0, got {self.rate}")
        if self.duration is None and self.count is None:
            raise BenchUsageError("give --duration or --count")
        if self.duration is not None and self.duration <= 0:
            raise BenchUsageError(f"--duration must be > 0, got {self.duration}")
        if self.count is not None and self.count <= 0:
            raise BenchUsageError(f"--count must be > 0, got {self.count}")
        if self.warmup < 0:
            raise BenchUsageError(f"--warmup must be >= 0, got {self.warmup}")
        if self.inflight is not None and not 1 <= self.inflight <= 65535:
            raise BenchUsageError(f"--inflight must be in 1..65535, got {self.inflight}")
        if self.drain_timeout <= 0:
            raise BenchUsageError(f"--drain-timeout must be > 0, got {self.drain_timeout}")
        if not 1 <= self.port <= 65535:
            raise BenchUsageError(f"--port must be in 1..65535, got {self.port}")
        if any(not 1 <= port <= 65535 for port in self.node_ports):
            raise BenchUsageError(f"--node-ports must be in 1..65535, got {self.node_ports}")
        if self.workers < 0:
            raise BenchUsageError(f"--workers must be >= 0, got {self.workers}")
        if not self.topic_prefix or any(c in self.topic_prefix for c in "+#\x00"):
            raise BenchUsageError(
                f"--topic-prefix must be a plain topic level: {self.topic_prefix!r}"
            )

    def window(self) -> int:
        """The in-flight window of each publisher before the broker's Receive Maximum caps it.

        3.1.1 has no Receive Maximum, and brokers cut a 3.1.1 client off when it exceeds
        their private limit (mosquitto disconnects at more than 20 unacknowledged QoS 2
        publishes, its max_inflight_messages); so 3.1.1 at QoS 2 defaults to 20.
        """
        if self.inflight is not None:
            return self.inflight
        if self.protocol == 4 and self.qos == 2:
            return DEFAULT_INFLIGHT_311_QOS2
        return DEFAULT_INFLIGHT

    def worker_count(self, clients: int) -> int:
        """The number of worker processes for a run with `clients` connections."""
        if self.workers:
            return max(1, min(self.workers, clients))
        if clients < MANY_CLIENTS:
            return 1
        return max(1, min(os.cpu_count() or 1, 4))
