"""`GET /api/v1/sessions` counts what an offline persistent session holds (issue 31, item 4):
`queued` is the number of messages stored for it, the same number the single-session route
shows as `stored_messages`, on a real `mqttq serve` (SQLite storage) over real HTTP, and
again after a restart restored the session from storage."""

from __future__ import annotations

from typing import Any

import pytest

from mqttq.admin.openapi import openapi_document
from tests.integration.admin_api import AdminApi
from tests.integration.helpers import Clients
from tests.integration.waiting import BrokerFactory, wait_for
from tests.integration.wire import Prop

pytestmark = pytest.mark.mqttq_only

API = "/api/v1"
PERSISTENT = [(Prop.SESSION_EXPIRY_INTERVAL, 600)]


def _listed(api: AdminApi) -> dict[str, dict[str, Any]]:
    return {s["client_id"]: s for s in api.ok("GET", f"{API}/sessions")["sessions"]}


def test_offline_sessions_list_the_messages_stored_for_them(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory()
    api = AdminApi(broker.data_dir)
    keeper = clients.connected(broker, "keeper", clean=False, props=PERSISTENT)
    keeper.subscribe(("news/#", 1))
    idle = clients.connected(broker, "idle", clean=False, props=PERSISTENT)
    idle.subscribe(("quiet/#", 1))
    keeper.disconnect()
    idle.disconnect()
    wait_for(
        lambda: not any(s["connected"] for s in _listed(api).values()),
        what="both sessions to go offline",
    )

    publisher = clients.connected(broker, "publisher")
    for n in range(3):
        assert publisher.publish(f"news/{n}", b"kept", qos=1) is not None
    publisher.disconnect()

    # PUBACK follows the durable inbox; the copy into keeper's queue comes just after.
    listed = wait_for(
        lambda: (found := _listed(api))["keeper"]["queued"] == 3 and found,
        what="keeper's three stored messages to be listed",
    )
    assert listed["keeper"]["connected"] is False
    assert listed["idle"]["queued"] == 0
    assert api.ok("GET", f"{API}/sessions/keeper")["stored_messages"] == 3

    broker.restart()  # sessions restored from storage: the messages are counted there
    api = AdminApi(broker.data_dir)
    listed = _listed(api)
    assert (listed["keeper"]["queued"], listed["idle"]["queued"]) == (3, 0)

    # Reconnecting delivers them: nothing is held any more.
    back = clients.connected(broker, "keeper", clean=False, props=PERSISTENT)
    received = back.receive_messages(3)
    assert sorted(m.topic for m in received) == ["news/0", "news/1", "news/2"]
    back.disconnect()
    wait_for(
        lambda: (
            _listed(api)["keeper"] == {**_listed(api)["keeper"], "connected": False, "queued": 0}
        ),
        what="keeper offline with nothing held",
    )


def test_openapi_says_what_queued_counts() -> None:
    summary = openapi_document()["components"]["schemas"]["Session"]
    described = summary["properties"]["queued"]["description"]
    assert "offline" in described and "stored" in described
