"""Test-client registry and the bystander used by the end-to-end tests (fixtures in
tests/conftest.py and tests/integration/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.integration.paho_client import PahoClient
from tests.integration.raw_client import RawClient
from tests.integration.waiting import BrokerUnderTest


class Clients:
    """Creates test clients and closes every one at teardown (before the broker stops)."""

    def __init__(self) -> None:
        self._raw: list[RawClient] = []
        self._paho: list[PahoClient] = []

    def raw(self, broker: BrokerUnderTest, *, rcvbuf: int | None = None) -> RawClient:
        client = RawClient(broker.port, broker.host, rcvbuf=rcvbuf)
        self._raw.append(client)
        return client

    def connected(self, broker: BrokerUnderTest, client_id: str = "", **connect: Any) -> RawClient:
        """A raw client that has connected (CONNECT accepted); see RawClient.connect."""
        client = self.raw(broker)
        client.connect(client_id, **connect)
        return client

    def paho(self, broker: BrokerUnderTest, client_id: str = "", **options: Any) -> PahoClient:
        """A connected paho client; see PahoClient for options (protocol=3|4|5, clean, ...)."""
        client = PahoClient(broker.port, client_id, host=broker.host, **options)
        self._paho.append(client)
        client.connect()
        return client

    def close_all(self) -> None:
        for paho_client in self._paho:
            paho_client.close()
        for raw_client in self._raw:
            raw_client.close()


class Bystander:
    """A well-behaved client connected before an attack; `check()` proves it still publishes
    and receives (a QoS 1 round trip through the broker)."""

    def __init__(self, clients: Clients, broker: BrokerUnderTest) -> None:
        self.client = clients.paho(broker, "bystander")
        assert self.client.subscribe("bystander/echo", 1) == [1]
        self._sent = 0
        self.check()

    def check(self) -> None:
        self._sent += 1
        payload = b"echo-%d" % self._sent
        assert self.client.publish("bystander/echo", payload, 1) == 0
        self.client.wait_messages(self._sent)
        assert self.client.payloads()[-1] == payload
        assert self.client.client.is_connected()


MakeBystander = Callable[[BrokerUnderTest], Bystander]
"""The `bystander` fixture: `bystander(broker)` connects a Bystander to that broker."""
