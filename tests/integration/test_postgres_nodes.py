"""Two broker nodes sharing one real PostgreSQL for credentials and tenant quotas
(`[auth] store = "postgres"`): what one node's admin API stores, the other enforces."""

from __future__ import annotations

import signal

import psycopg
import pytest

from tests.integration.admin_api import AdminApi
from tests.integration.helpers import Clients
from tests.integration.waiting import BrokerFactory, wait_for
from tests.integration.wire import RC

pytestmark = [pytest.mark.mqttq_only, pytest.mark.broker_process]  # SIGHUP


def test_credentials_and_quotas_are_shared_through_postgres(
    broker_factory: BrokerFactory, clients: Clients, postgres_url: str
) -> None:
    config = (
        f'[auth]\nstore = "postgres"\nanonymous = "never"\n[postgres]\nurl = "{postgres_url}"\n'
    )
    node_a = broker_factory(config=config)
    node_b = broker_factory(config=config)
    api_a = AdminApi(node_a.data_dir)
    api_b = AdminApi(node_b.data_dir)
    api_a.add_credential("device", "pw", tenant="acme")

    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(
            "SELECT username, tenant, password_hash FROM mqtt_client_credentials"
        ).fetchall()
    assert [(user, tenant) for user, tenant, _ in rows] == [("device", "acme")]
    # Hashed: the password is none of its fields (a random salt or hash may contain "pw").
    assert rows[0][2].startswith("scrypt$") and "pw" not in rows[0][2].split("$")

    # Node B reads the credential node A stored.
    first = clients.raw(node_b)
    assert first.connect("d1", username="device", password=b"pw").reason_code == 0

    api_a.set_tenant("acme", max_connections_per_node=1)
    assert api_b.ok("GET", "/api/v1/tenants/acme")["quota"]["max_connections_per_node"] == 1
    # Node B applies stored quotas on SIGHUP (and every 30 s on its own).
    assert node_b.process is not None
    node_b.process.send_signal(signal.SIGHUP)

    def refused_on_b() -> bool:
        client = clients.raw(node_b)
        connack = client.connect("d2", username="device", password=b"pw", expect_success=False)
        if connack.reason_code == 0:
            client.disconnect()
            return False
        assert connack.reason_code == RC.QUOTA_EXCEEDED
        return True

    wait_for(refused_on_b, what="node B to apply acme's connection quota")
    first.ping()  # the client already connected keeps its connection
