"""Shared steps of the blocked-clients tests: the broker's blocked list (the provider at
the head of its authentication chain) and entries made as an operator would."""

from __future__ import annotations

import time

from mqttq.auth.blocked.entries import BlockedClient, parse_entry
from mqttq.auth.blocked.service import BlockedClients
from mqttq.broker.connection.admission import chain_of
from tests.harness import InProcessBroker


def blocked_of(broker: InProcessBroker) -> BlockedClients:
    """The running broker's blocked list."""
    provider = chain_of(broker.broker.authenticator).provider("blocked")
    assert isinstance(provider, BlockedClients), provider
    return provider


def block(
    broker: InProcessBroker,
    kind: str,
    value: str,
    *,
    match_on: str | None = None,
    expires_in: float | None = None,
    now: float | None = None,
    reason: str = "test",
) -> BlockedClient:
    """Add an entry through the broker's list (as the admin API does)."""
    entry = parse_entry(
        kind,
        value,
        match_on=match_on,
        reason=reason,
        expires_in=expires_in,
        now=time.time() if now is None else now,
    )
    added: BlockedClient = broker.call(blocked_of(broker).add(entry))
    return added
