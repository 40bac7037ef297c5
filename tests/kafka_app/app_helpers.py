"""Helpers of the APPLICATION-client tests: a broker with the Kafka log on, an APPLICATION
credential, and raw persistent APPLICATION clients."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from mqttq.auth.model import ClientType, Credential
from mqttq.auth.passwords import hash_password
from mqttq.storage.sqlite.auth import SqliteAuthStore
from tests.harness import BrokerProcess, InProcessBroker
from tests.integration.helpers import Clients
from tests.integration.raw_client import RawClient
from tests.integration.wire import Prop
from tests.kafka_service import KafkaServer

ServedBroker = InProcessBroker | BrokerProcess
"""The broker of an APPLICATION test: in this process, or `mqttq serve` for kill -9."""

USER = "app"
PASSWORD = b"app-secret"
SESSION_EXPIRY = 3600


def kafka_config(
    kafka: KafkaServer, prefix: str, extra: str = "", redis_url: str = "", **application: Any
) -> str:
    """broker.toml with the Kafka log on, topics under `prefix`, `[kafka.application]`
    keys from `application`; `redis_url`: the Redis the node's cluster heartbeat goes to
    (a distributed node beats there; without it, the default 127.0.0.1:6379)."""
    lines = [
        "[storage]",
        'log = "kafka"',
        *(["[redis]", f'url = "{redis_url}"'] if redis_url else []),
        "[kafka]",
        f'bootstrap_servers = "{kafka.bootstrap}"',
        f'topic_prefix = "{prefix}"',
        "[kafka.application]",
    ]
    for key, value in application.items():
        lines.append(f"{key} = {value!r}" if not isinstance(value, str) else f'{key} = "{value}"')
    return "\n".join(lines) + "\n" + extra


def add_app_credential(broker: ServedBroker) -> None:
    """The credential `app` / `app-secret`, client type APPLICATION, any client id
    (written to the broker's auth store, which it reads at each CONNECT)."""

    async def add() -> None:
        store = SqliteAuthStore(broker.data_dir / "auth.db")
        await store.open()
        try:
            credential = Credential(USER, hash_password(PASSWORD.decode()))
            credential = Credential(
                USER, credential.password_hash, client_type=ClientType.APPLICATION
            )
            await store.put_credential(credential)
        finally:
            await store.close()

    asyncio.run(add())


AppBroker = Callable[..., ServedBroker]


def connect_app(
    clients: Clients,
    broker: ServedBroker,
    client_id: str,
    *,
    receive_maximum: int | None = None,
    expect_present: bool | None = None,
    rcvbuf: int | None = None,
) -> RawClient:
    """A raw MQTT 5 APPLICATION client with a persistent session (clean start 0)."""
    client = clients.raw(broker, rcvbuf=rcvbuf)
    props: list[tuple[int, int]] = [(Prop.SESSION_EXPIRY_INTERVAL, SESSION_EXPIRY)]
    if receive_maximum is not None:
        props.append((Prop.RECEIVE_MAXIMUM, receive_maximum))
    connack = client.connect(client_id, clean=False, props=props, username=USER, password=PASSWORD)
    if expect_present is not None:
        assert connack.session_present == expect_present, connack
    return client
