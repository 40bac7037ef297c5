"""SCRAM enhanced authentication end to end: the real broker on port 0, a client speaking
MQTT 5 AUTH from tests/scram/mqtt5_client.py, credentials with SCRAM secrets in the
broker's own credential store (issue 35)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqttq.auth.model import Credential
from mqttq.auth.passwords import hash_password
from mqttq.auth.scram import scram_secrets
from mqttq.codec.enums import ProtocolLevel
from mqttq.codec.packets import (
    AuthPacket,
    ConnackPacket,
    ConnectPacket,
    DisconnectPacket,
    PingreqPacket,
    PingrespPacket,
    PubackPacket,
    PublishPacket,
    SubscribePacket,
    SubscriptionRequest,
)
from mqttq.codec.properties import Properties
from mqttq.reasons import ReasonCode
from mqttq.storage.sqlite.auth import SqliteAuthStore
from tests.integration.waiting import BrokerFactory, BrokerUnderTest
from tests.scram.mqtt5_client import Mqtt5Client
from tests.scram.scram_client import ScramClient

pytestmark = pytest.mark.mqttq_only

CONFIG = '[auth]\nanonymous = "never"\n[mqtt]\nconnect_timeout = 1.0\n'
SHA256 = "SCRAM-SHA-256"
SHA512 = "SCRAM-SHA-512"


def add_credential(
    data_dir: Path,
    username: str,
    password: str,
    *,
    scram: bool = True,
    publish_acl: tuple[str, ...] = ("#",),
) -> None:
    """What `mqttq credentials add NAME --scram` stores, written to the broker's store."""
    password_hash = hash_password(password)
    secrets = scram_secrets(password, password_hash) if scram else ()
    credential = Credential(username, password_hash, publish_acl=publish_acl, scram=secrets)
    put(data_dir, credential)


def put(data_dir: Path, credential: Credential) -> None:

    async def write() -> None:
        store = SqliteAuthStore(data_dir / "auth.db")
        await store.open()
        try:
            await store.put_credential(credential)
        finally:
            await store.close()

    asyncio.run(write())


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerUnderTest:
    started = broker_factory(config=CONFIG)
    add_credential(started.data_dir, "user", "pencil", publish_acl=("allowed/#",))
    add_credential(started.data_dir, "other", "other-pw")
    add_credential(started.data_dir, "plain", "plain-pw", scram=False)
    return started


@pytest.fixture
def connect(broker: BrokerUnderTest) -> Iterator[type[Mqtt5Client]]:
    opened: list[Mqtt5Client] = []

    class Tracked(Mqtt5Client):
        def __init__(self) -> None:
            super().__init__(broker.port)
            opened.append(self)

    yield Tracked  # type: ignore[misc]
    for client in opened:
        client.close()


def ping(client: Mqtt5Client) -> bool:
    client.send(PingreqPacket())
    answer, _ = client.read_until(PingrespPacket)
    return isinstance(answer, PingrespPacket)


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_scram_connect_succeeds_and_the_server_proves_itself(
    connect: type[Mqtt5Client], mechanism: str
) -> None:
    client = connect()
    outcome = client.connect_scram("c1", ScramClient(mechanism, "user", "pencil"))
    assert outcome.connack is not None
    assert outcome.connack.reason_code == ReasonCode.SUCCESS
    [challenge] = outcome.before
    assert isinstance(challenge, AuthPacket)
    assert challenge.reason_code == ReasonCode.CONTINUE_AUTHENTICATION
    assert outcome.connack.properties.authentication_method == mechanism
    assert outcome.server_verified, "the CONNACK's server-final-message did not verify"
    assert ping(client)


def test_identity_and_acls_come_from_the_scram_credential(connect: type[Mqtt5Client]) -> None:
    client = connect()
    assert client.connect_scram("acl", ScramClient(SHA256, "user", "pencil")).server_verified
    client.publish("denied/x", b"no", qos=1)
    denied, _ = client.read_until(PubackPacket)
    assert isinstance(denied, PubackPacket)
    assert denied.reason_code == ReasonCode.NOT_AUTHORIZED
    client.publish("allowed/x", b"yes", qos=1)
    allowed, _ = client.read_until(PubackPacket)
    assert isinstance(allowed, PubackPacket)
    assert allowed.reason_code in (ReasonCode.SUCCESS, ReasonCode.NO_MATCHING_SUBSCRIBERS)


def test_wrong_proof_is_0x86_and_close_while_others_carry_on(
    connect: type[Mqtt5Client],
) -> None:
    bystander = connect()
    assert bystander.connect_scram("by", ScramClient(SHA256, "other", "other-pw")).server_verified
    bystander.send(SubscribePacket(1, [SubscriptionRequest("allowed/#", 1)]))

    wrong = connect()
    outcome = wrong.connect_scram(
        "bad", ScramClient(SHA256, "user", "pencil"), wrong_password="pencil2"
    )
    assert outcome.connack is not None
    assert outcome.connack.reason_code == ReasonCode.BAD_USER_NAME_OR_PASSWORD
    assert not outcome.server_verified
    assert outcome.connack.properties.authentication_data is None
    assert wrong.wait_closed() == []

    publisher = connect()
    assert publisher.connect_scram("pub", ScramClient(SHA512, "user", "pencil")).server_verified
    publisher.publish("allowed/after", b"still here", qos=1)
    message, _ = bystander.read_until(PublishPacket)
    assert isinstance(message, PublishPacket) and message.payload == b"still here"


@pytest.mark.parametrize(
    ("username", "password"),
    [("nobody", "pencil"), ("plain", "plain-pw")],
    ids=["unknown user", "credential without SCRAM secrets"],
)
def test_no_scram_secret_fails_like_a_wrong_proof(
    connect: type[Mqtt5Client], username: str, password: str
) -> None:
    """An unknown user and a user with no SCRAM secret are challenged like any other and
    refused at the proof: the wire does not tell them from a wrong password."""
    client = connect()
    outcome = client.connect_scram("x", ScramClient(SHA256, username, password))
    assert isinstance(outcome.before[0], AuthPacket)
    assert outcome.connack is not None
    assert outcome.connack.reason_code == ReasonCode.BAD_USER_NAME_OR_PASSWORD
    assert client.wait_closed() == []


def test_unsupported_method_is_0x8c(connect: type[Mqtt5Client]) -> None:
    client = connect()
    props = Properties(authentication_method="SCRAM-SHA-1", authentication_data=b"n,,n=u,r=x")
    client.send(ConnectPacket("m", ProtocolLevel.MQTT_5, properties=props))
    connack = client.read()
    assert isinstance(connack, ConnackPacket)
    assert connack.reason_code == ReasonCode.BAD_AUTHENTICATION_METHOD
    assert client.wait_closed() == []


def test_malformed_client_first_is_0x86(connect: type[Mqtt5Client]) -> None:
    client = connect()
    scram = ScramClient(SHA256, "user", "pencil")
    scram.first = lambda: b"p=tls-unique,,n=user,r=abc"  # type: ignore[method-assign]
    outcome = client.connect_scram("m", scram)
    assert outcome.connack is not None
    assert outcome.connack.reason_code == ReasonCode.BAD_USER_NAME_OR_PASSWORD
    assert outcome.connack.properties.reason_string is not None
    assert "channel binding" in outcome.connack.properties.reason_string


def test_a_packet_other_than_auth_during_the_exchange_is_0x82(
    connect: type[Mqtt5Client],
) -> None:
    client = connect()
    scram = ScramClient(SHA256, "user", "pencil")
    props = Properties(authentication_method=SHA256, authentication_data=scram.first())
    client.send(ConnectPacket("o", ProtocolLevel.MQTT_5, properties=props))
    challenge = client.read()
    assert isinstance(challenge, AuthPacket)
    client.publish("allowed/early", b"too soon")
    connack = client.read()
    assert isinstance(connack, ConnackPacket)
    assert connack.reason_code == ReasonCode.PROTOCOL_ERROR
    assert client.wait_closed() == []


def test_auth_0x19_during_the_connect_exchange_is_0x82(connect: type[Mqtt5Client]) -> None:
    client = connect()
    scram = ScramClient(SHA256, "user", "pencil")
    props = Properties(authentication_method=SHA256, authentication_data=scram.first())
    client.send(ConnectPacket("o", ProtocolLevel.MQTT_5, properties=props))
    assert isinstance(client.read(), AuthPacket)
    again = Properties(authentication_method=SHA256, authentication_data=scram.first())
    client.send(AuthPacket(ReasonCode.RE_AUTHENTICATE, again))
    connack = client.read()
    assert isinstance(connack, ConnackPacket)
    assert connack.reason_code == ReasonCode.PROTOCOL_ERROR


def test_a_client_silent_after_the_challenge_is_closed(connect: type[Mqtt5Client]) -> None:
    """No answer to the challenge within the connect timeout: the connection is closed
    (no CONNACK: the client never finished its CONNECT)."""
    client = connect()
    scram = ScramClient(SHA256, "user", "pencil")
    props = Properties(authentication_method=SHA256, authentication_data=scram.first())
    client.send(ConnectPacket("quiet", ProtocolLevel.MQTT_5, properties=props))
    assert isinstance(client.read(), AuthPacket)
    assert client.wait_closed() == []


def test_client_disconnecting_during_the_exchange_leaves_the_broker_serving(
    connect: type[Mqtt5Client],
) -> None:
    client = connect()
    scram = ScramClient(SHA256, "user", "pencil")
    props = Properties(authentication_method=SHA256, authentication_data=scram.first())
    client.send(ConnectPacket("gone", ProtocolLevel.MQTT_5, properties=props))
    assert isinstance(client.read(), AuthPacket)
    client.send(DisconnectPacket())
    assert client.wait_closed() == []
    after = connect()
    assert after.connect_scram("gone", ScramClient(SHA256, "user", "pencil")).server_verified


# ---------------------------------------------------------------------- re-authentication


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_reauthentication_succeeds_and_the_connection_goes_on(
    connect: type[Mqtt5Client], mechanism: str
) -> None:
    client = connect()
    assert client.connect_scram("re", ScramClient(mechanism, "user", "pencil")).server_verified
    answer, _, verified = client.reauthenticate(ScramClient(mechanism, "user", "pencil"))
    assert isinstance(answer, AuthPacket)
    assert answer.reason_code == ReasonCode.SUCCESS
    assert answer.properties.authentication_method == mechanism
    assert verified
    client.publish("allowed/x", b"after re-auth", qos=1)
    ack, _ = client.read_until(PubackPacket)
    assert isinstance(ack, PubackPacket) and ack.reason_code < 0x80
    again, _, verified_again = client.reauthenticate(ScramClient(mechanism, "user", "pencil"))
    assert isinstance(again, AuthPacket) and verified_again


def test_reauthentication_with_a_wrong_proof_is_disconnect_0x87(
    connect: type[Mqtt5Client],
) -> None:
    client = connect()
    assert client.connect_scram("re", ScramClient(SHA256, "user", "pencil")).server_verified
    answer, _, verified = client.reauthenticate(
        ScramClient(SHA256, "user", "pencil"), wrong_password="guess"
    )
    assert isinstance(answer, DisconnectPacket)
    assert answer.reason_code == ReasonCode.NOT_AUTHORIZED
    assert not verified
    assert client.wait_closed() == []


def test_reauthentication_as_another_user_is_disconnect_0x87(
    connect: type[Mqtt5Client],
) -> None:
    client = connect()
    assert client.connect_scram("re", ScramClient(SHA256, "user", "pencil")).server_verified
    answer, _, _ = client.reauthenticate(ScramClient(SHA256, "other", "other-pw"))
    assert isinstance(answer, DisconnectPacket)
    assert answer.reason_code == ReasonCode.NOT_AUTHORIZED
    assert client.wait_closed() == []


def test_reauthentication_with_another_method_is_disconnect_0x8c(
    connect: type[Mqtt5Client],
) -> None:
    client = connect()
    assert client.connect_scram("re", ScramClient(SHA256, "user", "pencil")).server_verified
    answer, _, _ = client.reauthenticate(ScramClient(SHA512, "user", "pencil"))
    assert isinstance(answer, DisconnectPacket)
    assert answer.reason_code == ReasonCode.BAD_AUTHENTICATION_METHOD


def test_auth_continue_out_of_order_on_a_live_connection_is_0x82(
    connect: type[Mqtt5Client],
) -> None:
    client = connect()
    assert client.connect_scram("re", ScramClient(SHA256, "user", "pencil")).server_verified
    stray = Properties(authentication_method=SHA256, authentication_data=b"c=biws,r=x,p=AAAA")
    client.send(AuthPacket(ReasonCode.CONTINUE_AUTHENTICATION, stray))
    answer, _ = client.read_until(DisconnectPacket)
    assert isinstance(answer, DisconnectPacket)
    assert answer.reason_code == ReasonCode.PROTOCOL_ERROR


def test_auth_on_a_password_connection_is_0x82(
    broker: BrokerUnderTest, connect: type[Mqtt5Client]
) -> None:
    client = connect()
    client.send(ConnectPacket("pw", ProtocolLevel.MQTT_5, username="plain", password=b"plain-pw"))
    connack = client.read()
    assert isinstance(connack, ConnackPacket) and connack.reason_code == ReasonCode.SUCCESS
    props = Properties(authentication_method=SHA256, authentication_data=b"n,,n=plain,r=abc")
    client.send(AuthPacket(ReasonCode.RE_AUTHENTICATE, props))
    answer, _ = client.read_until(DisconnectPacket)
    assert isinstance(answer, DisconnectPacket)
    assert answer.reason_code == ReasonCode.PROTOCOL_ERROR


def test_mqtt_311_client_without_auth_method_is_unaffected(
    connect: type[Mqtt5Client],
) -> None:
    client = connect()
    level = ProtocolLevel.MQTT_3_1_1
    client.reader.protocol_level = level
    client.send_at(ConnectPacket("v4", level, username="user", password=b"pencil"), level)
    connack = client.read()
    assert isinstance(connack, ConnackPacket) and connack.reason_code == ReasonCode.SUCCESS
    client.send_at(PingreqPacket(), level)
    assert isinstance(client.read(), PingrespPacket)


def test_a_password_changed_without_renewing_scram_stops_scram(
    broker: BrokerUnderTest, connect: type[Mqtt5Client]
) -> None:
    """A password change by a writer that knows nothing of SCRAM (only the hash changes)
    leaves secrets bound to the old hash: the old password no longer works over SCRAM."""
    changed = Credential("other", hash_password("new-pw"))

    async def read() -> Credential | None:
        store = SqliteAuthStore(broker.data_dir / "auth.db")
        await store.open()
        try:
            return await store.get_credential("other")
        finally:
            await store.close()

    stored = asyncio.run(read())
    assert stored is not None and len(stored.scram) == 2
    put(broker.data_dir, dataclasses.replace(stored, password_hash=changed.password_hash))
    client = connect()
    outcome = client.connect_scram("old", ScramClient(SHA256, "other", "other-pw"))
    assert outcome.connack is not None
    assert outcome.connack.reason_code == ReasonCode.BAD_USER_NAME_OR_PASSWORD
