"""mqttq/broker/cluster_node.py without Kafka: what a node makes of the records and
connect events it reads (the link is a real ClusterLink, never opened: these handlers
write nothing)."""

from __future__ import annotations

import asyncio

import pytest

from mqttq.broker.delivery.hub import Hub
from mqttq.broker.distributed.cluster_node import ClusterNode
from mqttq.broker.sessions.session import Session
from mqttq.cluster.link import ClusterLink
from mqttq.cluster.records import SessionInfo
from mqttq.config.schema import MqttSettings
from mqttq.limits import Limits, Quota
from mqttq.model import Message, Subscription
from mqttq.routing.router import Delivery
from mqttq.storage.memory import MemoryStorage
from mqttq.storage.ports import QueuedMessage


def _node(node_id: str = "node-1") -> ClusterNode:
    limits = Limits(Quota(), Quota(), rate_wait=0.0, burst_seconds=1.0, tcp_rate=1e9, now=0.0)
    hub = Hub(MqttSettings(), MemoryStorage(), limits)
    node = ClusterNode(hub, ClusterLink("127.0.0.1:1", "t.", node_id))
    hub.attach_cluster(node)
    return node


def _info(node: str | None, last: str, epoch: str, at: float | None = None) -> SessionInfo:
    return SessionInfo(node, last, 5, 3600, "DEVICE", "default", at, epoch)


def test_a_late_disconnect_record_of_an_older_connection_keeps_the_new_location() -> None:
    node = _node()
    node.on_session("c", _info("node-2", "node-2", "r1"))
    node.on_connect_event("c", "node-2", "r1", False)
    node.on_connect_event("c", "node-3", "r2", False)  # the client moved to node 3
    assert node.directory["c"].node == "node-3"
    # node 2 saved its disconnect of the older connection; read only now
    node.on_session("c", _info(None, "node-2", "r1", 10.0))
    assert (node.directory["c"].node, node.directory["c"].last_node) == ("node-3", "node-3")
    assert node.is_connected("c")
    # the connection of r2 ends: that record is applied
    node.on_session("c", _info(None, "node-3", "r2", 20.0))
    assert node.directory["c"].node is None
    assert not node.is_connected("c")


def test_remote_subscriptions_route_to_the_remote_client_and_are_replaced_whole() -> None:
    node = _node()
    node.on_session("c", _info("node-2", "node-2", "r1"))
    node.on_subscriptions("c", "default", [Subscription("a/+", 1), Subscription("b/#", 0)])
    router = node.hub.space("default").router
    message = Message("a/x", b"p", 1)
    deliveries = router.route(message, node.hub.is_online)
    assert [(d.client_id, d.qos) for d in deliveries] == [("c", 1)]
    node.on_subscriptions("c", "default", [Subscription("b/#", 0)])
    assert router.route(message, node.hub.is_online) == []
    node.on_subscriptions("c", None, [])  # deleted
    assert router.subscriptions_of("c") == []


def test_unknown_or_gone_clients_get_nothing() -> None:
    node = _node()
    delivery = Delivery("nobody", 1, False)
    assert node.deliver("default", delivery, Message("a", b"", 1)) is None
    # a non-persistent session whose client is disconnected: nothing waits for it
    node.on_session("gone", SessionInfo(None, "node-2", 5, 0, "DEVICE", "default", 1.0))
    assert node.deliver("default", Delivery("gone", 0, False), Message("a", b"", 0)) is None


def test_retained_records_set_and_clear_the_tenants_retained_messages() -> None:
    node = _node()
    node.on_retained("acme", "r/1", Message("r/1", b"on", 1, True))
    space = node.hub.space("acme")
    kept = space.retained.get("r/1")
    assert kept is not None and kept.payload == b"on"
    assert "r/1" in space.topic_refs
    node.on_retained("acme", "r/1", None)
    assert space.retained.get("r/1") is None
    assert "r/1" not in space.topic_refs


def test_a_newer_connection_elsewhere_during_a_resume_here_leaves_the_session_to_the_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A CONNECT here resumes this node's offline copy; node 2's later CONNECT is read,
    then node 2's session record, before the resume is done. The copy stays in the hub
    (the attaching connection holds it) and the CONNECT learns, when it settles, that it
    was taken over with its session continuing elsewhere."""

    async def scenario() -> None:
        node = _node()
        hub = node.hub
        copy = Session(hub, "c", 5, 3600, hub.space("default"))
        hub.sessions["c"] = copy
        taken: list[tuple[str, bool]] = []
        node.taken_over = lambda client_id, ends: taken.append((client_id, ends))
        written = asyncio.get_running_loop().create_future()
        written.set_result(None)
        monkeypatch.setattr(node.link, "connect_event", lambda *_args: written)
        claim = asyncio.create_task(node.claim("c", False))
        await asyncio.sleep(0)
        request = node._order.request_of("c")
        assert request is not None
        node.on_connect_event("c", "node-1", request, False)  # ours, read back
        assert await claim == request
        node.on_connect_event("c", "node-2", "r2", False)  # a later CONNECT on node 2
        node.on_session("c", _info("node-2", "node-2", "r2"))
        assert hub.sessions.get("c") is copy
        assert taken == []
        assert node.settled("c", request) is False  # taken over; the session lives on there

    asyncio.run(scenario())


def test_an_entry_goes_where_redis_saw_the_client_when_it_was_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The directory still says the persistent client is offline (its resume on node 2
    not read yet), but Redis named node 2 when it stored the entry: node 2's persisted
    downlink gets it. Without a marker the directory decides: it waits in Redis."""

    async def scenario() -> None:
        node = _node()
        node.on_session("c", _info(None, "node-3", "r1", 10.0))
        sent: list[tuple[str, str, int]] = []

        def send_downlink(
            to: str, client_id: str, _tenant: str, _message: Message, entry: QueuedMessage
        ) -> asyncio.Future[None]:
            sent.append((to, client_id, entry.packet_id))
            done = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done

        monkeypatch.setattr(node.link, "send_downlink", send_downlink)
        loop = asyncio.get_running_loop()
        for packet_id, holder in ((7, "node-2"), (8, "")):
            queued = loop.create_future()
            entry = QueuedMessage(packet_id, packet_id, Message("a", b"", 1), holder=holder)
            queued.set_result([entry])
            await node._hand_over_when_stored(queued, "c", "default")
        assert sent == [("node-2", "c", 7)]

    asyncio.run(scenario())
