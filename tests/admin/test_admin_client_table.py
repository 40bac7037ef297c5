"""AdminClient from the route table (issue 34): any route by its operation id, the path
filled in as single segments, the query checked against the route's parameters, against a
real broker's API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqttq.admin.api_table import ROUTES
from mqttq.admin.client import AdminApiError, AdminClient
from tests.admin.real_broker import TOKEN, RealBroker


@pytest.fixture
def real(tmp_path: Path) -> Iterator[RealBroker]:
    running = RealBroker(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def test_any_route_by_its_operation_id(real: RealBroker) -> None:
    for n in range(3):
        real.client(f"c/{n}")  # a '/' in a client id stays one path segment
    client = AdminClient(real.admin.url, TOKEN)
    page = client.call("listSessions", query={"limit": 2})
    assert ([s["client_id"] for s in page["items"]], page["total"]) == (["c/0", "c/1"], 3)
    assert client.call("getSession", path={"client_id": "c/2"})["client_id"] == "c/2"
    assert client.call("disconnectSession", path={"client_id": "c/2"}) == {"disconnected": True}
    assert client.call("health")["status"] == "ok"
    with pytest.raises(AdminApiError) as refused:
        client.call("getSession", path={"client_id": "nobody"})
    assert (refused.value.status, refused.value.field) == (404, "client_id")


def test_the_table_guards_the_call(real: RealBroker) -> None:
    client = AdminClient(real.admin.url, TOKEN)
    with pytest.raises(ValueError, match="colour"):
        client.call("listSessions", query={"colour": "red"})
    with pytest.raises(ValueError, match="path parameters missing"):
        client.call("getSession")
    with pytest.raises(KeyError):
        client.call("noSuchOperation")
    assert len({route.operation_id for route in ROUTES}) == len(ROUTES)
