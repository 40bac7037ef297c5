"""A blocked client's CONNECT is refused before authentication: 0x8A Banned in a 5.0
CONNACK, return code 5 in 3.1.1, by each kind of entry; expired entries match nothing."""

from __future__ import annotations

import time

import pytest

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
        connack = client.connect(
            client_id,
            level=level,
            username=username,
            password=b"secret" if username else None,
            expect_success=False,
        )
        assert connack.type == CONNACK
        assert connack.reason_code is not None
        client.wait_closed()
        return connack.reason_code
    finally:
        client.close()


@pytest.mark.parametrize(
    ("kind", "value", "match_on", "client_id", "username"),
    [
        ("client_id", "dev-1", None, "dev-1", None),
        ("username", "mallory", None, "dev-2", "mallory"),
        ("address", "127.0.0.1", None, "dev-3", None),
        ("address", "127.0.0.0/8", None, "dev-4", None),
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
    block(broker, kind, value, match_on=match_on)
    assert refused(broker.port, client_id, level=5, username=username) == BANNED
    assert refused(broker.port, client_id, level=4, username=username) == RC_NOT_AUTHORIZED


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
