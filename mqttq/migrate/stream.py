"""The source's rows, grouped into one `ClientPlan` per client, as they stream in.

Message rows arrive ordered by (client_id, serial_number), in batches that carry the
session rows of their clients: a client's rows are contiguous, so only the current client is
held (its newest `limit` rows), and its plan is made when the first row of the next client
arrives. Then come the clients that have a session row and no message. Both the migration
and --verify read the source through here, so they agree on what each client should become.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Final

from mqttq.migrate.plan import ClientPlan, ClientRows, Planner
from mqttq.migrate.source import PgSource

RowsRead = Callable[[int], None]
"""Told how many rows were just read (for progress bars)."""

_NO_CLIENT: Final = object()


async def plans_with_messages(
    source: PgSource,
    planner: Planner,
    pattern: str | None,
    after: str | None,
    *,
    rows_read: RowsRead,
    now_ms: Callable[[], int] | None = None,
) -> AsyncGenerator[ClientPlan, None]:
    """One plan per client with message rows, in the source's client order.

    `now_ms`, when given, is the expiry reference of each plan (default: the planner's
    clock when the client's rows are complete).
    """
    current: ClientRows | None = None
    current_id: object = _NO_CLIENT
    count = 0
    async with aclosing(source.message_rows(pattern, after)) as batches:
        async for rows, sessions in batches:
            for row in rows:
                client_id = row[0]
                if client_id != current_id:
                    if current is not None:
                        current.total = count
                        yield planner.plan(current, None if now_ms is None else now_ms())
                    current = planner.rows_of(row, sessions.get(client_id))
                    current_id = client_id
                    keep = current.kept.append
                    count = 0
                keep(row)
                count += 1
            rows_read(len(rows))
    if current is not None:
        current.total = count
        yield planner.plan(current, None if now_ms is None else now_ms())


async def plans_without_messages(
    source: PgSource, planner: Planner, pattern: str | None, after: str | None
) -> AsyncGenerator[ClientPlan, None]:
    """One plan per client that has a session row and no message row."""
    async with aclosing(source.session_rows(pattern, after)) as batches:
        async for rows in batches:
            for row in rows:
                yield planner.plan_session(row)
