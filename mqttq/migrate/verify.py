"""--verify: PostgreSQL and Redis compared, client by client.

The source is read again (a new snapshot) and planned with the migration's own rules; each
client's plan is compared with what Redis holds: its marker, the number of entries, their
order (score = serial), their packet ids (the key names), every JSON field (payload by
SHA-256) and the two counters. The first difference of a client is reported.

Expiry moves on while the comparison runs: an entry whose message expires within
`TOLERANCE_MS` of now may be on either side and is left out of the comparison, and a
reference whose message key is gone (expired) is not an entry. Run it right after the
migration: a broker that serves the clients meanwhile changes their queues.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from collections.abc import Callable
from contextlib import aclosing
from typing import Any, Final

from mqttq.migrate.plan import ClientPlan, Planner
from mqttq.migrate.redis_writer import RedisClientState, RedisWriter
from mqttq.migrate.report import VerifyReport
from mqttq.migrate.source import PgSource
from mqttq.migrate.stream import RowsRead, plans_with_messages, plans_without_messages
from mqttq.storage.redis.keys import SessionKeys, packet_id_of

TOLERANCE_MS: Final = 2000
"""Entries expiring this close to now are not compared (Redis and this clock may differ)."""
BATCH_ENTRIES: Final = 5000
"""Entries read back from Redis per pipeline (whole clients)."""


def _now_ms() -> int:
    return int(time.time() * 1000)


def _payload_digest(text: Any) -> str:
    if not isinstance(text, str):
        return "unreadable"
    try:
        return hashlib.sha256(base64.b64decode(text, validate=True)).hexdigest()[:16]
    except binascii.Error:
        return "not base64"


def _field_difference(expected: str, actual: bytes) -> str:
    """The first field where two JSON messages differ."""
    try:
        got = json.loads(actual)
    except ValueError:
        return "the stored message is not JSON"
    if not isinstance(got, dict):
        return "the stored message is not a JSON object"
    want = json.loads(expected)
    for name in sorted(want.keys() | got.keys()):
        if want.get(name) != got.get(name):
            if name == "payload":
                return (
                    f"payload sha256 {_payload_digest(want.get(name))} in PostgreSQL, "
                    f"{_payload_digest(got.get(name))} in Redis"
                )
            return f"{name}: {want.get(name)!r} in PostgreSQL, {got.get(name)!r} in Redis"
    return "the JSON text differs"


def compare(plan: ClientPlan, state: RedisClientState, prefix: str, now_ms: int) -> str | None:
    """The first difference between a client's plan and Redis, or None."""
    if state.marker is None:
        return "not migrated: Redis has no migration marker for this client"
    entries = plan.entries
    optional = {e.serial for e in entries if e.deadline_ms <= now_ms + TOLERANCE_MS}
    expected = [e for e in entries if e.serial not in optional]
    actual = [a for a in state.entries if a[2] is not None and a[0] not in optional]
    if len(expected) != len(actual):
        return f"count: {len(expected)} messages in PostgreSQL, {len(actual)} in Redis"
    messages = SessionKeys(prefix, plan.client_id).messages
    for position, (entry, (score, key, value)) in enumerate(zip(expected, actual, strict=True)):
        if score != entry.serial:
            return f"order: message {position} has serial {entry.serial}, Redis score {score}"
        packet_id = packet_id_of(key, messages)
        if packet_id != entry.packet_id:
            return f"packet id at serial {entry.serial}: {entry.packet_id}, Redis key {key!r}"
        assert value is not None
        if value != entry.json.encode():
            return f"message at serial {entry.serial}: {_field_difference(entry.json, value)}"
    for name, want, got in (
        ("last_packet_id", plan.last_packet_id, state.last_packet_id),
        ("last_serial_number", plan.last_serial, state.last_serial),
    ):
        if want is not None and str(want) != got:
            return f"{name}: {want} in PostgreSQL, {got} in Redis"
    return None


class Verifier:
    """Compares the source with Redis; `run()` gives the VerifyReport. `rows_read` and
    `clients_read` are told the progress (rows read, clients compared)."""

    def __init__(
        self,
        source: PgSource,
        redis: RedisWriter,
        planner: Planner,
        *,
        pattern: str | None,
        rows_read: RowsRead,
        clients_read: RowsRead | None = None,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.source = source
        self.redis = redis
        self.planner = planner
        self.pattern = pattern
        self.rows_read = rows_read
        self.clients_read = clients_read
        self.clock_ms = clock_ms
        self.report = VerifyReport()
        self._batch: list[ClientPlan] = []
        self._entries = 0

    async def run(self) -> VerifyReport:
        # Planned as of TOLERANCE_MS ago: what expired since is optional, not missing.
        def reference() -> int:
            return self.clock_ms() - TOLERANCE_MS

        with_messages = plans_with_messages(
            self.source,
            self.planner,
            self.pattern,
            None,
            rows_read=self.rows_read,
            now_ms=reference,
        )
        without = plans_without_messages(self.source, self.planner, self.pattern, None)
        async with self.source.snapshot():
            for stream in (with_messages, without):
                async with aclosing(stream) as plans:
                    async for plan in plans:
                        await self._add(plan)
        await self._flush()
        return self.report

    async def _add(self, plan: ClientPlan) -> None:
        self.report.clients_checked += 1
        if self.clients_read is not None:
            self.clients_read(1)
        if plan.rejected:
            self.report.clients_not_compared += 1
            return
        self._batch.append(plan)
        self._entries += plan.count + 1
        if self._entries >= BATCH_ENTRIES:
            await self._flush()

    async def _flush(self) -> None:
        batch, self._batch, self._entries = self._batch, [], 0
        if not batch:
            return
        states = await self.redis.read([p.client_id for p in batch], entries=True)
        now = self.clock_ms()
        report = self.report
        for plan, state in zip(batch, states, strict=True):
            if state.marker is None and state.existing:
                report.clients_not_compared += 1  # another session holds it (skip)
                continue
            difference = compare(plan, state, self.redis.key_prefix, now)
            report.messages_checked += plan.count
            if difference is None:
                report.clients_equal += 1
            else:
                report.add_difference(plan.client_id, difference)
