"""A blocked client's CONNECT is refused before authentication: 0x8A Banned in a 5.0
CONNACK, return code 5 in 3.1.1, by each kind of entry; expired entries match nothing."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from mqttq.auth.authenticator import AuthRefusal
from mqttq.auth.blocked.entries import parse_entry
from mqttq.auth.blocked.service import BlockedClients
from mqttq.auth.providers.base import SKIP, AuthRequest
from mqttq.storage.sqlite.blocked import SqliteBlockedStore
from tests.blocked.helpers import block
from tests.harness import InProcessBroker
from tests.integration.raw_client import RawClient
from tests.integration.wire import CONNACK

BANNED = 0x8A
RC_NOT_AUTHORIZED = 5


def refused(port: int, client_id: str, *, level: int, username: str | None = None) -> int:
    """The CONNACK's reason code (5.0) or return code (3.x); the connection is closed."""
    client = RawClient(port)
    try:
        return answer(client, client_id, level=level, username=username)
    finally:
        client.close()


def answer(client: RawClient, client_id: str, *, level: int, username: str | None = None) -> int:
    """CONNECT on an open connection: the CONNACK's code; the broker then closes it."""
    connack = client.connect(
        client_id,
        level=level,
        username=username,
        password=b"secret" if username else None,
        expect_success=False,
    )
    assert connack.type == CONNACK
    assert connack.reason_code is not None
    assert client.wait_closed() == []
    return connack.reason_code


@pytest.mark.parametrize(
    ("kind", "value", "match_on", "client_id", "username"),
    [
        ("client_id", "dev-1", None, "dev-1", None),
        ("username", "mallory", None, "dev-2", "mallory"),
        ("regex", "bad-.*", "client_id", "bad-42", None),
        ("regex", "temp[0-9]+", "username", "dev-5", "temp7"),
    ],
)
def test_each_selector_refuses_connect_with_banned(  # noqa: PLR0917 (the parameters)
    broker: InProcessBroker,
    kind: str,
    value: str,
    match_on: str | None,
    client_id: str,
    username: str | None,
) -> None:
    # Connected before the entry exists: the entry is met at CONNECT. (An address entry
    # closes the connections from that address at once: test_connected_and_failed.py,
    # test_accept.py; the provider's own address check is tested below.)
    v5, v4 = RawClient(broker.port), RawClient(broker.port)
    try:
        block(broker, kind, value, match_on=match_on)
        assert answer(v5, client_id, level=5, username=username) == BANNED
        assert answer(v4, client_id, level=4, username=username) == RC_NOT_AUTHORIZED
    finally:
        v5.close()
        v4.close()


def test_other_clients_still_connect(broker: InProcessBroker) -> None:
    block(broker, "client_id", "dev-1")
    block(broker, "regex", "bad-.*")
    client = RawClient(broker.port)
    try:
        assert client.connect("dev-2").reason_code == 0
        assert refused(broker.port, "dev-1", level=5) == BANNED
    finally:
        client.close()
    # A regex matches the whole client id, not a part of it.
    other = RawClient(broker.port)
    try:
        assert other.connect("not-bad-1").reason_code == 0
    finally:
        other.close()


def test_expired_entry_matches_nothing(broker: InProcessBroker) -> None:
    an_hour_ago = time.time() - 3600
    block(broker, "client_id", "dev-old", expires_in=60, now=an_hour_ago)
    block(broker, "client_id", "dev-new", expires_in=3600)
    client = RawClient(broker.port)
    try:
        assert client.connect("dev-old").reason_code == 0
    finally:
        client.close()
    assert refused(broker.port, "dev-new", level=5) == BANNED


def test_the_provider_refuses_a_blocked_address(tmp_path: Path) -> None:
    """The "blocked" provider itself: an address entry (v4 or v6 CIDR) answers 0x8A for a
    CONNECT from inside it, SKIP (ask the next provider) from outside."""

    async def decide(addresses: list[str]) -> list[object]:
        blocked = BlockedClients(SqliteBlockedStore.in_data_dir(tmp_path))
        await blocked.start()
        try:
            for network in ("192.0.2.0/24", "2001:db8::/32"):
                await blocked.add(parse_entry("address", network, now=time.time()))
            answers = []
            for address in addresses:
                request = AuthRequest("dev", None, None, address, "tcp")
                answers.append(await blocked.authenticate(request))
            return answers
        finally:
            await blocked.stop()

    inside, inside_v6, outside = asyncio.run(decide(["192.0.2.9", "2001:db8::7", "192.0.3.1"]))
    for decision in (inside, inside_v6):
        assert isinstance(decision, AuthRefusal)
        assert (decision.reason_code, decision.reason) == (BANNED, "blocked")
    assert outside is SKIP
