"""Reading the source (`PgSource` + `stream`) against a real PostgreSQL: message rows come
without a join, and each batch carries the session rows of its clients, so a client's
counters must be right wherever the fetch boundaries fall and whatever its id holds."""

from __future__ import annotations

import asyncio
from contextlib import aclosing

import pytest

from mqttq.migrate.plan import ClientPlan, Planner
from mqttq.migrate.source import PgSource
from mqttq.migrate.stream import plans_with_messages, plans_without_messages
from tests.migrate.source_data import MsgRow, SessionRow, create_source, insert

# Ids a lookup by key must match exactly: quotes, LIKE and escape characters, non-ASCII.
ODD_IDS = ["a'b", 'q"q', "x%y_z", "back\\slash", "ünï-cødé", "space id", "dev-1"]


def read_plans(url: str, fetch_size: int) -> tuple[list[ClientPlan], list[ClientPlan], int]:
    """Plans of the clients with messages, of those with only a session, and rows read."""
    read = 0

    def count(rows: int) -> None:
        nonlocal read
        read += rows

    async def run() -> tuple[list[ClientPlan], list[ClientPlan]]:
        planner = Planner(10_000, 3600)
        async with PgSource(url, fetch_size=fetch_size) as source, source.snapshot():
            with_messages = plans_with_messages(source, planner, None, None, rows_read=count)
            async with aclosing(with_messages) as plans:
                first = [plan async for plan in plans]
            async with aclosing(plans_without_messages(source, planner, None, None)) as plans:
                second = [plan async for plan in plans]
        return first, second

    first, second = asyncio.run(run())
    return first, second, read


@pytest.mark.parametrize("fetch_size", [1, 2, 3, 7, 1000])
def test_session_counters_reach_their_client_across_fetch_boundaries(
    postgres_url: str, fetch_size: int
) -> None:
    create_source(postgres_url)
    messages = [
        MsgRow(client_id, serial, packet_id=serial)
        for n, client_id in enumerate(ODD_IDS)
        for serial in range(1, 2 + n % 4)
    ]
    # Every other client has a session row, with counters ahead of its newest row.
    sessions = [
        SessionRow(client_id, 1000 + n, 500 + n)
        for n, client_id in enumerate(ODD_IDS)
        if n % 2 == 0
    ]
    sessions.append(SessionRow("only-session", 77, 7))
    insert(postgres_url, messages, sessions)

    with_messages, without, read = read_plans(postgres_url, fetch_size)

    assert read == len(messages)
    assert sorted(plan.client_id for plan in with_messages) == sorted(ODD_IDS)
    for plan in with_messages:
        n = ODD_IDS.index(plan.client_id)
        newest = 1 + n % 4
        assert plan.count == newest
        expected = (500 + n, 1000 + n) if n % 2 == 0 else (newest, newest)
        assert (plan.last_packet_id, plan.last_serial) == expected, plan.client_id
    assert [(p.client_id, p.last_packet_id, p.last_serial) for p in without] == [
        ("only-session", 7, 77)
    ]


def test_bad_rows_are_reported_per_client_through_the_source(postgres_url: str) -> None:
    """The rows PostgreSQL hands over (binary form, plain tuples) are checked as before: a
    bad row rejects its client with the client id, the serial and the reason."""
    create_source(postgres_url)
    insert(
        postgres_url,
        [
            MsgRow("good", 1, packet_id=1),
            MsgRow("bad", 1, packet_id=1),
            MsgRow("bad", 2, packet_id=None),
            MsgRow("bad", 3, packet_id=3, qos=7, topic="a/#"),
            MsgRow("bad", 4, packet_id=1),
        ],
        [SessionRow("bad", 4, 1)],
    )
    with_messages, _without, _read = read_plans(postgres_url, 2)
    plans = {plan.client_id: plan for plan in with_messages}
    assert not plans["good"].rejected
    found = [(p.client_id, p.serial_number, p.reason.value) for p in plans["bad"].problems]
    assert found == [
        ("bad", 2, "packet_id"),
        ("bad", 3, "qos"),
        ("bad", 3, "topic"),
        ("bad", 1, "duplicate_packet_id"),
        ("bad", 4, "duplicate_packet_id"),
    ]
    assert plans["bad"].problems[2].detail == "'a/#': topic name contains a wildcard [MQTT-3.3.2-2]"
