"""The `Sink` port: where an integration delivers, and how a sink says no.

A sink takes batches. It answers in one of three ways:
- it returns normally: every delivery of the batch was accepted, except those it lists as
  rejected (each with its reason); those go to the dead-letter place, the rest are done;
- it raises `SinkUnavailable`: nothing is known to be accepted (the sink is down, timed out,
  answered 5xx); the worker retries the whole batch with backoff, so a sink may see a
  delivery twice (at least once; `Delivery.seq` tells a duplicate);
- it raises `SinkRejected`: the whole batch can never be accepted (HTTP 4xx for a batch
  body): every delivery is dead-lettered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from mqttq.errors import MqttqError
from mqttq.integrations.record import Delivery


class SinkError(MqttqError):
    """A sink did not accept a batch."""


class SinkUnavailable(SinkError):
    """Try again later: the sink is down, slow or answered that it is overloaded."""


class SinkRejected(SinkError):
    """Never: the sink refused the batch for what it is (4xx, a constraint violated)."""


@dataclass(frozen=True, slots=True)
class Rejected:
    """One delivery the sink refused for good, and why (goes to the dead-letter place)."""

    delivery: Delivery
    reason: str


class Sink(Protocol):
    """Where an integration delivers. Implementations own their connections."""

    async def open(self) -> None:
        """Connect (or prepare to); raising `SinkUnavailable` when the sink is down is fine:
        the worker retries `open` with backoff like a failed batch."""
        ...

    async def send(self, batch: Sequence[Delivery]) -> Sequence[Rejected]:
        """Deliver `batch` (in order), returning the deliveries refused for good."""
        ...

    async def probe(self, sample: Delivery) -> str:
        """Send one sample delivery and return what the sink answered, in one line (the
        `integration test` command prints it). Raises `SinkError` with the reason."""
        ...

    async def close(self) -> None:
        """Release connections; idempotent."""
        ...
