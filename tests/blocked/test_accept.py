"""A connection from a blocked address is closed when it is accepted, before the broker
reads a byte of it (no CONNACK: the client learns nothing but the close); the refusal is
counted. Through a PROXY protocol listener the address is the header's
(tests/proxy_protocol)."""

from __future__ import annotations

import socket

from tests.blocked.helpers import block
from tests.harness import InProcessBroker
from tests.integration.admin_api import AdminApi
from tests.integration.waiting import DEADLINE, HOST


def test_connection_from_blocked_address_is_closed_before_reading(
    broker: InProcessBroker,
) -> None:
    block(broker, "address", "127.0.0.0/8")
    with socket.create_connection((HOST, broker.port), timeout=DEADLINE) as sock:
        # Nothing sent: the broker closes it of its own accord.
        try:
            data = sock.recv(1)
        except ConnectionResetError:
            data = b""
        assert data == b""
    metrics = AdminApi(broker.data_dir).metrics()
    assert 'mqttq_refusals_total{reason="blocked",tenant="default"} 1.0' in metrics
