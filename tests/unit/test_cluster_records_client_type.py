"""A session record's `clientType` is read as a `ClientType` (one ClientType, issue 32)."""

from __future__ import annotations

import json

from mqttq.auth.model import ClientType
from mqttq.cluster.records import SessionInfo, decode_session, encode_session


def _record(client_type: str) -> bytes:
    return json.dumps(
        {
            "node": None,
            "lastNode": "node-1",
            "protocolLevel": 5,
            "expiry": 60,
            "clientType": client_type,
            "tenant": "default",
        }
    ).encode()


def test_client_type_is_read_as_the_enum() -> None:
    assert decode_session(_record("APPLICATION")).client_type is ClientType.APPLICATION
    assert decode_session(_record("DEVICE")).client_type is ClientType.DEVICE


def test_an_unknown_client_type_acts_as_a_device() -> None:
    assert decode_session(_record("ROBOT")).client_type is ClientType.DEVICE


def test_the_record_spells_the_client_type_as_tbmq_does() -> None:
    info = SessionInfo(None, "node-1", 5, 60, ClientType.APPLICATION, "default")
    assert json.loads(encode_session(info))["clientType"] == "APPLICATION"
    assert decode_session(encode_session(info)) == info
