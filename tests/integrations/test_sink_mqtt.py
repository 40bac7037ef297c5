"""The MQTT bridge against a real Mosquitto on a free port: out (the sink), in (the source),
the loop rule with two bridges forming a loop, TLS and mTLS, credentials from the
environment, and the settings' errors."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from mqttq.codec import Properties, PublishPacket
from mqttq.errors import ConfigError
from mqttq.integrations.bridge.client import Backoff, ClientOptions, MqttClient
from mqttq.integrations.bridge.source import BridgeSource
from mqttq.integrations.record import Delivery
from mqttq.integrations.sink import SinkUnavailable
from mqttq.integrations.sinks.mqtt import MqttSink, MqttSinkSettings
from tests.integration.tls_pki import Pki, make_pki
from tests.integration.waiting import DEADLINE, HOST
from tests.integrations.mqtt_mosquitto import MOSQUITTO, Mosquitto, Subscriber, publish

pytestmark = pytest.mark.skipif(
    not MOSQUITTO.exists()
    or shutil.which("mosquitto_sub") is None
    or shutil.which("stdbuf") is None,
    reason="Debian's mosquitto and mosquitto-clients needed",
)

T = TypeVar("T")
WHERE = "integration[0]"
FORMAT = ["-F", "MSG|%t %p %P"]


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, DEADLINE * 3)

    return asyncio.run(bounded())


def settings(server: Mosquitto, **keys: Any) -> MqttSinkSettings:
    return MqttSinkSettings.from_table({"host": HOST, "port": server.port, **keys}, WHERE)


def deliveries(*payloads: str, topic: str = "sensors/1", first_seq: int = 1) -> list[Delivery]:
    return [
        Delivery(topic, payload.encode(), seq=first_seq + index)
        for index, payload in enumerate(payloads)
    ]


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Mosquitto]:
    server = Mosquitto(tmp_path / "mosquitto")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def subscribers() -> Iterator[Callable[..., Subscriber]]:
    started: list[Subscriber] = []

    def start(server: Mosquitto, *args: str) -> Subscriber:
        started.append(Subscriber(server, *args))
        return started[-1]

    yield start
    for subscriber in started:
        subscriber.close()


# -- out ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [5, 4])
def test_out_batch_arrives_in_order(
    mosquitto: Mosquitto, subscribers: Callable[..., Subscriber], version: int
) -> None:
    sub = subscribers(mosquitto, "-t", "remote/#", *FORMAT)
    sink = MqttSink(
        settings(mosquitto, topic_prefix="remote/", protocol_version=version), "to-mosquitto"
    )

    async def scenario() -> list[Any]:
        try:
            first = list(await sink.send(deliveries("m0", "m1", "m2", "m3", "m4")))
            second = list(await sink.send(deliveries("m5", first_seq=6)))
            return first + second
        finally:
            await sink.close()

    assert run(scenario()) == []
    stamp = " mqttq-bridge:mqttq-bridge-to-mosquitto" if version == 5 else " "
    assert sub.wait_messages(6) == [f"remote/sensors/1 m{index}{stamp}" for index in range(6)]


def test_out_rewrite_then_prefix_and_properties_kept(
    mosquitto: Mosquitto, subscribers: Callable[..., Subscriber]
) -> None:
    sub = subscribers(mosquitto, "-t", "#", "-F", "MSG|%t %p %P %C")
    table = {"topic_prefix": "site-a/", "topic_rewrite": {"from": "sensors/", "to": "s/"}}
    sink = MqttSink(settings(mosquitto, **table), "rewrite")
    delivery = Delivery(
        "sensors/kitchen",
        b"21.5",
        user_properties=(("unit", "C"),),
        content_type="text/plain",
    )
    other = Delivery("other/x", b"1")

    async def scenario() -> None:
        try:
            assert await sink.send([delivery, other]) == []
        finally:
            await sink.close()

    run(scenario())
    assert sub.wait_messages(2) == [
        "site-a/s/kitchen 21.5 unit:C mqttq-bridge:mqttq-bridge-rewrite text/plain",
        "site-a/other/x 1 mqttq-bridge:mqttq-bridge-rewrite ",
    ]


def test_out_skips_what_came_through_a_bridge(
    mosquitto: Mosquitto, subscribers: Callable[..., Subscriber]
) -> None:
    sub = subscribers(mosquitto, "-t", "#", *FORMAT)
    sink = MqttSink(settings(mosquitto), "out")
    bridged = Delivery("t/1", b"came-in", user_properties=(("mqttq-bridge", "from-cloud"),))

    async def scenario() -> dict[str, int]:
        try:
            assert await sink.send([bridged, *deliveries("local", topic="t/1")]) == []
            return sink.statistics()
        finally:
            await sink.close()

    assert run(scenario())["skipped"] == 1
    # The local one is sent after the skipped one: had that been sent, it would come first.
    assert sub.wait_messages(1) == ["t/1 local mqttq-bridge:mqttq-bridge-out"]


def test_out_remote_down_is_unavailable_then_delivered_after_restart(
    mosquitto: Mosquitto, subscribers: Callable[..., Subscriber]
) -> None:
    sink = MqttSink(settings(mosquitto, topic_prefix="r/"), "restart")

    async def scenario() -> list[str]:
        errors: list[str] = []
        try:
            assert await sink.send(deliveries("before")) == []
            mosquitto.kill()
            for _ in range(2):  # the connection it had, then a new one refused
                with pytest.raises(SinkUnavailable) as failure:
                    await sink.send(deliveries("a", "b", "c", first_seq=2))
                errors.append(str(failure.value))
            mosquitto.start()
            sub = subscribers(mosquitto, "-t", "r/#", *FORMAT)
            assert await sink.send(deliveries("a", "b", "c", first_seq=2)) == []
            lines = await asyncio.to_thread(sub.wait_messages, 3)
            assert lines == [f"r/sensors/1 {p} mqttq-bridge:mqttq-bridge-restart" for p in "abc"]
            return errors
        finally:
            await sink.close()

    errors = run(scenario())
    assert errors[-1] == f"cannot connect to {HOST}:{mosquitto.port}: connection refused"
    assert errors[0].startswith(f"connection to {HOST}:{mosquitto.port} lost"), errors


def test_out_refused_publish_is_rejected_and_the_rest_flows(
    tmp_path: Path, subscribers: Callable[..., Subscriber]
) -> None:
    server = Mosquitto(tmp_path / "acl", acl="topic readwrite ok/#\ntopic read secret/#\n")
    server.start()
    try:
        sub = subscribers(server, "-t", "ok/#", *FORMAT)
        sink = MqttSink(settings(server), "acl")
        batch = [
            Delivery("ok/1", b"one", seq=1),
            Delivery("secret/2", b"two", seq=2),
            Delivery("ok/3", b"three", seq=3),
        ]

        async def scenario() -> list[tuple[int, str]]:
            try:
                return [(item.delivery.seq, item.reason) for item in await sink.send(batch)]
            finally:
                await sink.close()

        assert run(scenario()) == [(2, "remote refused 'secret/2': PUBACK NOT_AUTHORIZED")]
        assert sub.wait_messages(2) == [
            "ok/1 one mqttq-bridge:mqttq-bridge-acl",
            "ok/3 three mqttq-bridge:mqttq-bridge-acl",
        ]
    finally:
        server.stop()


def test_probe_publishes_to_the_probe_topic(
    mosquitto: Mosquitto, subscribers: Callable[..., Subscriber]
) -> None:
    sub = subscribers(mosquitto, "-t", "$mqttq/bridge/#", "-t", "#", *FORMAT)
    sink = MqttSink(settings(mosquitto), "probed")

    async def scenario() -> str:
        try:
            return await sink.probe(Delivery("sample", b"hello"))
        finally:
            await sink.close()

    answer = run(scenario())
    assert answer == (
        f"{HOST}:{mosquitto.port} (MQTT 5.0) acknowledged '$mqttq/bridge/probed/probe': "
        "PUBACK SUCCESS"
    )
    assert sub.wait_messages(1) == ["$mqttq/bridge/probed/probe hello "]


def test_probe_of_a_stopped_remote_says_why(mosquitto: Mosquitto) -> None:
    mosquitto.stop()
    sink = MqttSink(settings(mosquitto), "down")

    async def scenario() -> str:
        try:
            with pytest.raises(SinkUnavailable) as failure:
                await sink.probe(Delivery("sample", b"hello"))
            return str(failure.value)
        finally:
            await sink.close()

    assert run(scenario()).startswith(f"cannot connect to {HOST}:{mosquitto.port}: ")


# -- in -----------------------------------------------------------------------------------


class Collected:
    """What `deliver` got, and a way to wait for a number of them."""

    def __init__(self) -> None:
        self.items: list[Delivery] = []
        self.changed = asyncio.Event()

    async def deliver(self, delivery: Delivery) -> None:
        self.items.append(delivery)
        self.changed.set()

    async def wait(self, count: int) -> list[Delivery]:
        while len(self.items) < count:
            self.changed.clear()
            await self.changed.wait()
        return self.items


async def started(source: BridgeSource) -> asyncio.Task[None]:
    task = asyncio.create_task(source.run())
    await source.connected.wait()
    return task


def test_in_delivers_and_gets_what_was_published_while_down(mosquitto: Mosquitto) -> None:
    table = {"direction": "in", "remote_filters": ["cloud/#"], "topic_prefix": "from-cloud/"}
    bridge = settings(mosquitto, **table)

    async def scenario() -> list[Delivery]:
        collected = Collected()
        source = BridgeSource(bridge, "from-cloud", collected.deliver, tenant="t1")
        task = await started(source)
        await asyncio.to_thread(
            publish, mosquitto, "cloud/a", "1", "-D", "PUBLISH", "user-property", "k", "v"
        )
        await asyncio.to_thread(publish, mosquitto, "cloud/b", "2")
        await collected.wait(2)
        await source.close()
        await task
        # The bridge is away: the remote queues for its persistent session.
        for payload in ("3", "4"):
            await asyncio.to_thread(publish, mosquitto, "cloud/c", payload)
        again = BridgeSource(bridge, "from-cloud", collected.deliver, tenant="t1")
        task = await started(again)
        items = await collected.wait(4)
        await again.close()
        await task
        return items

    items = run(scenario())
    assert [(d.topic, d.payload, d.tenant, d.qos) for d in items] == [
        ("from-cloud/cloud/a", b"1", "t1", 1),
        ("from-cloud/cloud/b", b"2", "t1", 1),
        ("from-cloud/cloud/c", b"3", "t1", 1),
        ("from-cloud/cloud/c", b"4", "t1", 1),
    ]
    assert items[0].user_properties == (("k", "v"), ("mqttq-bridge", "from-cloud"))
    assert items[0].client_id == "mqttq-bridge-from-cloud"


def test_in_acknowledges_only_after_the_callback_returned(mosquitto: Mosquitto) -> None:
    bridge = settings(mosquitto, direction="in", remote_filters=["jobs/#"])

    async def scenario() -> tuple[list[bytes], list[Delivery]]:
        attempts: list[bytes] = []
        collected = Collected()

        async def deliver(delivery: Delivery) -> None:
            attempts.append(delivery.payload)
            if len(attempts) == 1:
                raise RuntimeError("local broker busy")
            await collected.deliver(delivery)

        fast = Backoff(initial=0.01, maximum=0.05)
        source = BridgeSource(bridge, "jobs", deliver, backoff=fast)
        task = await started(source)
        await asyncio.to_thread(publish, mosquitto, "jobs/1", "first")
        await asyncio.to_thread(publish, mosquitto, "jobs/2", "second")
        items = await collected.wait(2)
        await source.close()
        await task
        return attempts, items

    attempts, items = run(scenario())
    # The failed callback left "first" unacknowledged: Mosquitto sent it again.
    assert attempts[0] == b"first"
    assert [d.payload for d in items] == [b"first", b"second"]


# -- the loop: an out and an in bridge between two brokers ---------------------------------


def test_two_bridges_forming_a_loop_deliver_once(
    tmp_path: Path, subscribers: Callable[..., Subscriber]
) -> None:
    """Local broker L (a Mosquitto here, standing for mqttq) bridges `t/#` out to remote R and
    in from R. The local side of the integrations (the broker hook) is played by two
    clients: one subscribed at L feeding the out sink, one republishing the in source's
    deliveries at L with their user properties."""
    local, remote = Mosquitto(tmp_path / "local"), Mosquitto(tmp_path / "remote")
    local.start()
    remote.start()
    try:
        at_local = subscribers(local, "-t", "t/#", *FORMAT)
        at_remote = subscribers(remote, "-t", "t/#", *FORMAT)
        out_sink = MqttSink(settings(remote), "to-remote")
        in_settings = settings(remote, direction="in", remote_filters=["t/#"])

        async def scenario() -> tuple[dict[str, int], dict[str, int]]:
            republisher = MqttClient(ClientOptions(HOST, local.port, "hook-in"))
            await republisher.connect()

            async def republish(delivery: Delivery) -> None:
                props = Properties(user_properties=list(delivery.user_properties))
                future = await republisher.publish(
                    delivery.topic, delivery.payload, properties=props
                )
                assert future is not None
                await republisher.wait_acks([future])

            async def export(packet: PublishPacket) -> None:
                delivery = Delivery(
                    packet.topic,
                    packet.payload,
                    user_properties=tuple(packet.properties.user_properties),
                )
                assert await out_sink.send([delivery]) == []

            hook_out = MqttClient(ClientOptions(HOST, local.port, "hook-out"), export)
            await hook_out.connect()
            await hook_out.subscribe(["t/#"], 1)
            source = BridgeSource(
                in_settings, "from-remote", republish, own_origins={"mqttq-bridge-to-remote"}
            )
            task = await started(source)
            try:
                await asyncio.to_thread(publish, local, "t/1", "a")
                await asyncio.to_thread(publish, local, "t/1", "b")
                await asyncio.to_thread(at_remote.wait_messages, 2)
                await asyncio.to_thread(publish, remote, "t/2", "c")
                await asyncio.to_thread(at_local.wait_messages, 3)
                await asyncio.to_thread(publish, local, "t/1", "d")
                await asyncio.to_thread(at_remote.wait_messages, 4)
                while source.statistics()["dropped"] < 3:  # d coming back (bounded by run())
                    await asyncio.sleep(0.01)
                return out_sink.statistics(), source.statistics()
            finally:
                await source.close()
                await task
                await hook_out.close()
                await republisher.close()
                await out_sink.close()

        out_stats, in_stats = run(scenario())
        # An echo would arrive before the message published after it (one path, in order).
        assert at_local.messages() == [
            "t/1 a ",
            "t/1 b ",
            "t/2 c mqttq-bridge:from-remote",
            "t/1 d ",
        ]
        assert at_remote.messages() == [
            "t/1 a mqttq-bridge:mqttq-bridge-to-remote",
            "t/1 b mqttq-bridge:mqttq-bridge-to-remote",
            "t/2 c ",
            "t/1 d mqttq-bridge:mqttq-bridge-to-remote",
        ]
        assert out_stats["skipped"] == 1  # c, back at L from the in bridge
        assert in_stats == {"received": 1, "dropped": 3}  # c; a, b, d were our own exports
    finally:
        local.stop()
        remote.stop()


# -- TLS, credentials ---------------------------------------------------------------------


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


def tls_server(tmp_path: Path, pki: Pki, *, require_certificate: bool) -> Mosquitto:
    server = Mosquitto(
        tmp_path / "tls",
        tls=(pki.cafile, pki.certfile, pki.keyfile),
        require_certificate=require_certificate,
    )
    server.start()
    return server


def send_over_tls(server: Mosquitto, name: str, **keys: Any) -> list[Any]:
    bridge = MqttSinkSettings.from_table(
        {"host": HOST, "port": server.tls_port, "tls": True, **keys}, WHERE
    )
    sink = MqttSink(bridge, name)

    async def scenario() -> list[Any]:
        try:
            return list(await sink.send(deliveries("secure", topic="tls/1")))
        finally:
            await sink.close()

    return run(scenario())


def test_tls_with_a_ca_file(
    tmp_path: Path, pki: Pki, subscribers: Callable[..., Subscriber]
) -> None:
    server = tls_server(tmp_path, pki, require_certificate=False)
    try:
        sub = subscribers(server, "-t", "tls/#", *FORMAT)
        assert send_over_tls(server, "tls", ca_file=str(pki.cafile)) == []
        assert sub.wait_messages(1) == ["tls/1 secure mqttq-bridge:mqttq-bridge-tls"]
        # Without the CA the server certificate is not trusted; tls_verify = false skips it.
        with pytest.raises(SinkUnavailable, match=r"^TLS handshake with .* failed: .*CERTIFICATE"):
            send_over_tls(server, "untrusted")
        assert send_over_tls(server, "unverified", tls_verify=False) == []
        assert len(sub.wait_messages(2)) == 2
    finally:
        server.stop()


def test_mutual_tls(tmp_path: Path, pki: Pki, subscribers: Callable[..., Subscriber]) -> None:
    server = tls_server(tmp_path, pki, require_certificate=True)
    certfile, keyfile = pki.client("bridge")
    try:
        sub = subscribers(server, "-t", "tls/#", *FORMAT)
        keys = {"ca_file": str(pki.cafile), "cert_file": str(certfile), "key_file": str(keyfile)}
        assert send_over_tls(server, "mtls", **keys) == []
        assert sub.wait_messages(1) == ["tls/1 secure mqttq-bridge:mqttq-bridge-mtls"]
        with pytest.raises(SinkUnavailable):
            send_over_tls(server, "no-client-cert", ca_file=str(pki.cafile))
    finally:
        server.stop()


def test_password_from_the_environment_never_shown(
    tmp_path: Path, subscribers: Callable[..., Subscriber], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3cret-Pa55"
    server = Mosquitto(tmp_path / "auth", users={"bridge": secret, "reader": "r"})
    server.start()
    try:
        sub = subscribers(server, "-u", "reader", "-P", "r", "-t", "auth/#", *FORMAT)
        bridge = settings(server, username="bridge", password="${BRIDGE_PASSWORD}")
        assert bridge.public()["password"] == "***"
        assert secret not in repr(bridge) and secret not in str(bridge.public())

        def attempt(name: str) -> list[Any]:
            sink = MqttSink(bridge, name)

            async def scenario() -> list[Any]:
                try:
                    return list(await sink.send(deliveries("ok", topic="auth/1")))
                finally:
                    await sink.close()

            return run(scenario())

        monkeypatch.delenv("BRIDGE_PASSWORD", raising=False)
        with pytest.raises(SinkUnavailable) as unset:
            attempt("unset")
        assert str(unset.value) == (
            "config key 'integration[unset].password': environment variable "
            "BRIDGE_PASSWORD is not set"
        )
        monkeypatch.setenv("BRIDGE_PASSWORD", "wrong-" + secret)
        with pytest.raises(SinkUnavailable) as wrong:
            attempt("wrong")
        assert "refused the connection: NOT_AUTHORIZED" in str(wrong.value)
        assert secret not in str(wrong.value)
        monkeypatch.setenv("BRIDGE_PASSWORD", secret)
        assert attempt("right") == []
        assert sub.wait_messages(1) == ["auth/1 ok mqttq-bridge:mqttq-bridge-right"]
    finally:
        server.stop()


# -- settings -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "key", "problem"),
    [
        ({"host": None}, "host", "is required"),
        ({"host": 5}, "host", "must be a string, got int"),
        ({"port": 0}, "port", "must be between 1 and 65535, got 0"),
        ({"port": "1883"}, "port", "must be an integer, got '1883'"),
        ({"direction": "both"}, "direction", "must be 'out' or 'in', got 'both'"),
        ({"remote_filters": ["a/#"]}, "remote_filters", 'only for direction = "in"'),
        (
            {"direction": "in", "remote_filters": ["a/#/b"]},
            "remote_filters",
            "'a/#/b' is not a valid topic filter",
        ),
        ({"direction": "in"}, "filters", "must be a non-empty array of topic filters"),
        ({"topic_prefix": "a/+/"}, "topic_prefix", "must not hold '+' or '#'"),
        (
            {"topic_rewrite": {"from": "a/"}},
            "topic_rewrite",
            'must be a table {from = "a/", to = "b/"}',
        ),
        ({"qos": 2}, "qos", "must be 0 or 1, got 2"),
        ({"protocol_version": 3}, "protocol_version", "must be 4 or 5, got 3"),
        ({"keep_alive": -1}, "keep_alive", "must be between 0 and 65535, got -1"),
        ({"tls": "yes"}, "tls", "must be true or false, got 'yes'"),
        ({"ca_file": "/etc/hostname"}, "ca_file", "needs tls = true"),
        (
            {"tls": True, "ca_file": "/nonexistent/ca.pem"},
            "ca_file",
            "no such file: '/nonexistent/ca.pem'",
        ),
        ({"tls": True, "key_file": "/etc/hostname"}, "key_file", "needs cert_file"),
        ({"password": "x"}, "password", "needs username"),
        ({"session_expiry_interval": 0}, "session_expiry_interval", "must be between 1 and"),
        ({"max_inflight_messages": 0}, "max_inflight_messages", "must be between 1 and 65535"),
    ],
)
def test_bad_settings_name_the_key(keys: dict[str, Any], key: str, problem: str) -> None:
    table = {"host": HOST, **keys}
    table = {name: value for name, value in table.items() if value is not None}
    with pytest.raises(ConfigError) as failure:
        MqttSinkSettings.from_table(table, WHERE)
    assert failure.value.key == f"{WHERE}.{key}"
    assert failure.value.problem.startswith(problem), failure.value.problem


def test_defaults_and_public() -> None:
    bridge = MqttSinkSettings.from_table(
        {"host": "broker.example", "filters": ["a/#"], "direction": "in", "username": "u"}, WHERE
    )
    assert bridge.remote_filters == ("a/#",)
    assert bridge.public() == {
        "host": "broker.example",
        "port": 1883,
        "direction": "in",
        "topic_prefix": "",
        "qos": 1,
        "keep_alive": 60,
        "protocol_version": 5,
        "session_expiry_interval": 86400,
        "max_inflight_messages": 100,
        "tls": False,
        "tls_verify": True,
        "remote_filters": ["a/#"],
        "username": "u",
    }
    assert set(bridge.public()) <= MqttSinkSettings.KEYS
    assert bridge.map_topic("a/b") == "a/b"
    rewritten = MqttSinkSettings.from_table(
        {"host": "h", "topic_prefix": "p/", "topic_rewrite": {"from": "a/", "to": "b/"}}, WHERE
    )
    assert [rewritten.map_topic(t) for t in ("a/x", "c/a/x")] == ["p/b/x", "p/c/a/x"]
