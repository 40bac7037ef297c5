"""APPLICATION clients with `[auth] store = "postgres"`: the context a disconnect leaves
is a row of application_session_ctx in PostgreSQL, and the next connection re-sends the
unacknowledged messages from it with the same packet ids."""

from __future__ import annotations

import asyncio
import json

import psycopg

from mqttq.auth.model import ClientType, Credential
from mqttq.auth.passwords import hash_password
from mqttq.storage.postgres.auth import PostgresAuthStore
from tests.conftest import BrokerFactory
from tests.integration.helpers import Clients
from tests.integration.waiting import wait_for
from tests.integration.wire import PUBACK, ack_packet
from tests.kafka_app.app_helpers import PASSWORD, USER, connect_app, kafka_config
from tests.kafka_service import KafkaServer


def add_credential(url: str) -> None:
    async def add() -> None:
        store = PostgresAuthStore(url)
        await store.open()
        try:
            await store.put_credential(
                Credential(
                    USER, hash_password(PASSWORD.decode()), client_type=ClientType.APPLICATION
                )
            )
        finally:
            await store.close()

    asyncio.run(add())


def saved_context(url: str, client_id: str) -> tuple[int | None, list[dict[str, object]]] | None:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT pack_offset, unacked::text FROM application_session_ctx WHERE client_id = %s",
            (client_id,),
        ).fetchone()
    return None if row is None else (row[0], json.loads(row[1]))


def test_context_in_postgres_and_resend(
    broker_factory: BrokerFactory,
    kafka: KafkaServer,
    kafka_prefix: str,
    postgres_url: str,
    clients: Clients,
) -> None:
    add_credential(postgres_url)
    extra = f'[auth]\nstore = "postgres"\n[postgres]\nurl = "{postgres_url}"\n'
    broker = broker_factory(kafka_config(kafka, kafka_prefix, extra))
    app = connect_app(clients, broker, "pgapp")
    app.subscribe(("p/#", 1))
    publisher = clients.connected(broker, "pub")
    for n in range(3):
        publisher.publish("p/a", b"%d" % n, qos=1)
    first = app.receive_messages(3, ack=False)
    app.send(ack_packet(PUBACK, first[1].packet_id or 0, v5=True))
    app.ping()
    app.disconnect()
    app.close()
    wait_for(
        lambda: (saved_context(postgres_url, "pgapp") or (None, []))[1] != [],
        what="the context row",
    )
    assert saved_context(postgres_url, "pgapp") == (
        3,
        [
            {"offset": 0, "packetId": 1, "kind": "PUBLISH"},
            {"offset": 2, "packetId": 3, "kind": "PUBLISH"},
        ],
    )
    again = connect_app(clients, broker, "pgapp", expect_present=True)
    resent = again.receive_messages(2)
    assert [(m.payload, m.packet_id, m.dup) for m in resent] == [(b"0", 1, True), (b"2", 3, True)]
