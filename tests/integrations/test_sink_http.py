"""The http sink against real aiohttp servers on 127.0.0.1 port 0 (tests/integrations/
http_receivers.py): what the server received (bodies, headers, connections), and how the
sink answers the worker (accepted, `Rejected`, `SinkRejected`, `SinkUnavailable`).

No pytest-asyncio: each test runs its scenario with `asyncio.run`.
"""

from __future__ import annotations

import asyncio
import base64
import re
import ssl
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from mqttq.errors import ConfigError
from mqttq.integrations.record import Delivery, payload_from_envelope
from mqttq.integrations.secrets import expand_env
from mqttq.integrations.sink import SinkRejected, SinkUnavailable
from mqttq.integrations.sinks.http import HttpSink, HttpSinkSettings
from mqttq.integrations.spec import parse_integration
from tests.integration.tls_pki import make_pki
from tests.integrations.http_receivers import Receiver

WHERE = "integration[0]"


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())


def settings(**table: Any) -> HttpSinkSettings:
    return HttpSinkSettings.from_table(table, WHERE)


def deliveries(*payloads: bytes, topic: str = "sensors/kitchen/temp") -> list[Delivery]:
    return [
        Delivery(
            topic=topic,
            payload=payload,
            qos=1,
            client_id="dev-1",
            tenant="acme",
            timestamp_ms=1_700_000_000_000 + seq,
            seq=seq,
        )
        for seq, payload in enumerate(payloads, start=1)
    ]


async def send_with(table: Mapping[str, Any], batch: list[Delivery], name: str = "hook") -> Any:
    sink = HttpSink(HttpSinkSettings.from_table(table, WHERE), name)
    try:
        await sink.open()
        return await sink.send(batch)
    finally:
        await sink.close()


# --- bodies ------------------------------------------------------------------------------


def test_envelope_one_request_per_delivery_in_order_on_one_connection() -> None:
    async def scenario() -> None:
        async with Receiver() as server:
            batch = deliveries(b"21.5", b"\xff\x00", b"23.0")
            rejected = await send_with({"url": server.url()}, batch)
            assert rejected == []
            got = server.received
            assert [r.json()["payload"] for r in got] == [
                "21.5",
                base64.b64encode(b"\xff\x00").decode(),
                "23.0",
            ]
            first = got[0].json()
            assert first == {
                "topic": "sensors/kitchen/temp",
                "payload": "21.5",
                "qos": 1,
                "retain": False,
                "client_id": "dev-1",
                "tenant": "acme",
                "timestamp": 1_700_000_000_001,
            }
            assert got[1].json()["payload_encoding"] == "base64"
            assert [payload_from_envelope(r.json()) for r in got] == [d.payload for d in batch]
            assert all(r.method == "POST" and r.path == "/ingest" for r in got)
            assert [r.headers["Content-Type"] for r in got] == ["application/json"] * 3
            assert [r.headers["Idempotency-Key"] for r in got] == ["hook:1", "hook:2", "hook:3"]
            assert got[0].headers["X-Mqttq-Integration"] == "hook"
            # HTTP/1.1 keep-alive: the three requests came over one connection.
            assert len({r.peer for r in got}) == 1

    run(scenario)


def test_array_body_is_one_request_with_the_batch_in_order() -> None:
    async def scenario() -> None:
        async with Receiver() as server:
            table = {"url": server.url(), "body": "array"}
            assert await send_with(table, deliveries(b"a", b"b", b"c")) == []
            assert await send_with(table, deliveries(b"alone")) == []
            assert len(server.received) == 2
            whole, single = server.received
            assert [item["payload"] for item in whole.json()] == ["a", "b", "c"]
            assert [item["timestamp"] for item in whole.json()] == [
                1_700_000_000_001,
                1_700_000_000_002,
                1_700_000_000_003,
            ]
            assert whole.headers["Idempotency-Key"] == "hook:1-3"
            # Always an array, even of one delivery.
            assert isinstance(single.json(), list) and single.json()[0]["payload"] == "alone"

    run(scenario)


def test_payload_encoding_base64_encodes_text_too() -> None:
    async def scenario() -> None:
        async with Receiver() as server:
            await send_with(
                {"url": server.url(), "payload_encoding": "base64"}, deliveries(b"21.5")
            )
            body = server.received[0].json()
            assert body["payload"] == base64.b64encode(b"21.5").decode()
            assert body["payload_encoding"] == "base64"

    run(scenario)


def test_raw_body_is_the_payload_with_its_content_type_and_topic_headers() -> None:
    async def scenario() -> None:
        async with Receiver() as server:
            typed = Delivery(
                topic="sensors/käche/1",
                payload=b'{"t":1}',
                content_type="application/json",
                client_id="dev 1",
                retain=True,
                timestamp_ms=5,
                seq=7,
            )
            untyped = Delivery(topic="bin", payload=b"\x00\x01", seq=8)
            table = {"url": server.url("/raw"), "body": "raw", "method": "put"}
            assert await send_with(table, [typed, untyped]) == []
            first, second = server.received
            assert (first.method, first.path, first.body) == ("PUT", "/raw", b'{"t":1}')
            assert first.headers["Content-Type"] == "application/json"
            assert first.headers["X-Mqttq-Topic"] == "sensors/k%C3%A4che/1"
            assert first.headers["X-Mqttq-Client-Id"] == "dev%201"
            assert first.headers["X-Mqttq-Retain"] == "true"
            assert first.headers["X-Mqttq-Timestamp"] == "5"
            assert first.headers["Idempotency-Key"] == "hook:7"
            assert second.body == b"\x00\x01"
            assert second.headers["Content-Type"] == "application/octet-stream"

    run(scenario)


def test_configured_headers_are_sent_and_content_type_replaces_the_default() -> None:
    async def scenario() -> None:
        async with Receiver() as server:
            table = {
                "url": server.url(),
                "headers": {"Content-Type": "application/vnd.acme+json", "X-Source": "mqttq"},
            }
            await send_with(table, deliveries(b"1"))
            got = server.received[0].headers
            assert got["Content-Type"] == "application/vnd.acme+json"
            assert got["X-Source"] == "mqttq"

    run(scenario)


# --- the transient path --------------------------------------------------------------------


def test_server_down_is_unavailable_then_back_up_delivers() -> None:
    async def scenario() -> None:
        server = Receiver()
        await server.start()
        port = server.port
        await server.stop()
        sink = HttpSink(settings(url=server.url()), "hook")
        batch = deliveries(b"1", b"2")
        try:
            with pytest.raises(SinkUnavailable) as down:
                await sink.send(batch)
            assert f"POST http://127.0.0.1:{port}/ingest" in str(down.value)
            await server.start(port)
            try:
                assert await sink.send(batch) == []
                assert [r.body for r in server.received] == [
                    b'{"topic":"sensors/kitchen/temp","payload":"1","qos":1,"retain":false,'
                    b'"client_id":"dev-1","tenant":"acme","timestamp":1700000000001}',
                    b'{"topic":"sensors/kitchen/temp","payload":"2","qos":1,"retain":false,'
                    b'"client_id":"dev-1","tenant":"acme","timestamp":1700000000002}',
                ]
            finally:
                await server.stop()
        finally:
            await sink.close()

    run(scenario)


def test_500_is_unavailable_and_the_retry_is_delivered_with_the_same_key() -> None:
    async def scenario() -> None:
        async with Receiver(statuses=[500]) as server:
            sink = HttpSink(settings(url=server.url(), body="array"), "hook")
            batch = deliveries(b"x", b"y")
            try:
                with pytest.raises(SinkUnavailable, match=r"HTTP 500 Internal Server Error"):
                    await sink.send(batch)
                assert await sink.send(batch) == []
            finally:
                await sink.close()
            assert [r.status for r in server.received] == [500, 200]
            assert server.received[0].body == server.received[1].body
            keys = {r.headers["Idempotency-Key"] for r in server.received}
            assert keys == {"hook:1-2"}

    run(scenario)


@pytest.mark.parametrize("status", [301, 408, 429, 502, 503])
def test_retry_statuses_are_unavailable(status: int) -> None:
    async def scenario() -> None:
        async with Receiver(default=status) as server:
            with pytest.raises(SinkUnavailable, match=rf"HTTP {status}"):
                await send_with({"url": server.url()}, deliveries(b"1"))

    run(scenario)


def test_a_slow_server_times_out_as_unavailable() -> None:
    async def scenario() -> None:
        async with Receiver(hold=True) as server:
            with pytest.raises(SinkUnavailable) as slow:
                await send_with({"url": server.url(), "timeout_ms": 200}, deliveries(b"1"))
            assert str(slow.value) == f"POST {server.url()}: no answer within 200 ms"

    run(scenario)


# --- the permanent path --------------------------------------------------------------------


def test_4xx_on_an_array_rejects_the_whole_batch() -> None:
    async def scenario() -> None:
        async with Receiver(default=400) as server:
            with pytest.raises(SinkRejected) as refused:
                await send_with({"url": server.url(), "body": "array"}, deliveries(b"1", b"2"))
            assert str(refused.value) == f"POST {server.url()}: HTTP 400 Bad Request: refused: no"

    run(scenario)


def test_4xx_on_one_message_rejects_it_and_the_rest_are_delivered() -> None:
    async def scenario() -> None:
        def answer(body: bytes) -> int:
            return 422 if b"poison" in body else 200

        async with Receiver(answer=answer) as server:
            batch = deliveries(b"1", b"poison", b"3")
            rejected = await send_with({"url": server.url()}, batch)
            assert [(r.delivery, r.reason) for r in rejected] == [
                (batch[1], f"POST {server.url()}: HTTP 422 Unprocessable Entity: refused: no")
            ]
            assert [(r.json()["payload"], r.status) for r in server.received] == [
                ("1", 200),
                ("poison", 422),
                ("3", 200),
            ]

    run(scenario)


# --- connections and TLS -------------------------------------------------------------------


def test_max_connections_bounds_the_pool() -> None:
    async def scenario() -> None:
        async with Receiver(hold_until_in_flight=2) as server:
            sink = HttpSink(settings(url=server.url(), max_connections=2), "hook")
            try:
                batches = [deliveries(str(i).encode()) for i in range(6)]
                results = await asyncio.gather(*(sink.send(b) for b in batches))
            finally:
                await sink.close()
            assert list(results) == [[]] * 6
            assert len(server.received) == 6
            assert server.max_in_flight == 2
            assert len({r.peer for r in server.received}) == 2

    run(scenario)


def server_tls(tmp_path: Path) -> tuple[ssl.SSLContext, Path]:
    pki = make_pki(tmp_path / "pki")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.certfile, pki.keyfile)
    return context, pki.cafile


def test_tls_verified_with_ca_file(tmp_path: Path) -> None:
    context, cafile = server_tls(tmp_path)

    async def scenario() -> None:
        async with Receiver(ssl_context=context) as server:
            assert server.url().startswith("https://")
            await send_with({"url": server.url(), "ca_file": str(cafile)}, deliveries(b"tls"))
            assert [r.json()["payload"] for r in server.received] == ["tls"]

    run(scenario)


def test_tls_unknown_ca_is_unavailable_unless_verification_is_off(tmp_path: Path) -> None:
    context, _ = server_tls(tmp_path)

    async def scenario() -> None:
        async with Receiver(ssl_context=context) as server:
            with pytest.raises(SinkUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
                await send_with({"url": server.url()}, deliveries(b"1"))
            assert server.received == []
            await send_with({"url": server.url(), "tls_verify": False}, deliveries(b"2"))
            assert [r.json()["payload"] for r in server.received] == ["2"]

    run(scenario)


# --- secrets -------------------------------------------------------------------------------

SECRET = "s3cr3t-T0ken-value"


def test_secrets_expanded_at_open_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_TOKEN", SECRET)
    monkeypatch.setenv("HOOK_PASSWORD", "pa55word")

    async def scenario() -> None:
        async with Receiver(default=401, echo_header="Authorization") as server:
            url = f"http://127.0.0.1:{server.port}/ingest?api_key=${{HOOK_TOKEN}}&x=1"
            table = {"url": url, "headers": {"Authorization": "Bearer ${HOOK_TOKEN}"}}
            hook = settings(**table)
            assert hook.url == url  # the template is what is stored
            shown = hook.public()
            assert shown["headers"] == {"Authorization": "***"}
            assert shown["url"] == f"http://127.0.0.1:{server.port}/ingest?api_key=***&x=1"
            assert SECRET not in repr(shown)
            rejected = await send_with(table, deliveries(b"1"))
            got = server.received[0]
            assert got.headers["Authorization"] == f"Bearer {SECRET}"
            assert got.path == "/ingest"
            (refusal,) = rejected
            # The server echoed the token back; the reason has it scrubbed.
            assert refusal.reason == (f"POST {shown['url']}: HTTP 401 Unauthorized: refused: ***")

    run(scenario)


def test_a_password_in_the_url_is_sent_as_basic_auth_and_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOOK_PASSWORD", "pa55word")

    async def scenario() -> None:
        async with Receiver(default=403, echo_header="Authorization") as server:
            url = f"http://user:${{HOOK_PASSWORD}}@127.0.0.1:{server.port}/ingest"
            shown = settings(url=url).public()["url"]
            assert shown == f"http://user:***@127.0.0.1:{server.port}/ingest"
            (refusal,) = await send_with({"url": url}, deliveries(b"1"))
            basic = base64.b64encode(b"user:pa55word").decode()
            assert server.received[0].headers["Authorization"] == f"Basic {basic}"
            assert refusal.reason == f"POST {shown}: HTTP 403 Forbidden: refused: Basic ***"
            with pytest.raises(ConfigError) as both:
                settings(url=url, headers={"authorization": "Bearer x"})
            assert both.value.key == f"{WHERE}.headers.authorization"

    run(scenario)


def test_an_unset_variable_fails_open_naming_key_and_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HOOK_MISSING", raising=False)

    async def scenario() -> None:
        sink = HttpSink(
            settings(url="http://127.0.0.1:9/x", headers={"X-Key": "${HOOK_MISSING}"}), "hook"
        )
        with pytest.raises(ConfigError) as unset:
            await sink.open()
        assert unset.value.key == "integration[hook].headers.X-Key"
        assert unset.value.problem == "environment variable HOOK_MISSING is not set"
        await sink.close()

    run(scenario)


def test_a_whole_url_from_the_environment_is_checked_at_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOOK_URL", "ftp://files.example/x")

    async def scenario() -> None:
        sink = HttpSink(settings(url="${HOOK_URL}"), "hook")
        with pytest.raises(ConfigError) as bad:
            await sink.open()
        assert bad.value.key == "integration[hook].url"
        assert "ftp" not in str(bad.value)
        await sink.close()

    run(scenario)


def test_expand_env() -> None:
    env = {"A": "1", "B_2": "two"}
    assert expand_env("x${A}y${B_2}$z$", "k", env) == "x1ytwo$z$"
    with pytest.raises(ConfigError, match=r"config key 'k': environment variable C is not set"):
        expand_env("${C}", "k", env)
    with pytest.raises(ConfigError, match=r"not a valid environment variable reference"):
        expand_env("${1A}", "k", env)


# --- probe ---------------------------------------------------------------------------------


def test_probe_posts_the_sample_and_says_what_the_server_answered() -> None:
    async def scenario() -> None:
        async with Receiver(statuses=[200, 404]) as server:
            sink = HttpSink(settings(url=server.url(), body="array"), "hook")
            try:
                answer = await sink.probe(Delivery(topic="$test", payload=b"hello"))
                assert re.fullmatch(r"HTTP 200 OK \(\d+ ms\)", answer)
                assert server.received[0].json()[0]["payload"] == "hello"
                with pytest.raises(SinkRejected, match=r"HTTP 404 Not Found"):
                    await sink.probe(Delivery(topic="$test", payload=b"hello"))
            finally:
                await sink.close()
            await sink.close()  # idempotent
        down = HttpSink(settings(url=server.url()), "hook")
        try:
            with pytest.raises(SinkUnavailable, match=r"Cannot connect"):
                await down.probe(Delivery(topic="$test", payload=b"x"))
        finally:
            await down.close()

    run(scenario)


# --- settings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "key", "problem"),
    [
        ({}, "url", "is required"),
        ({"url": 5}, "url", "must be a string, got int"),
        ({"url": "ftp://x"}, "url", "must be an http:// or https:// URL, got 'ftp://x'"),
        ({"url": "http://"}, "url", "must name a host, got 'http://'"),
        ({"url": "http://h:99999/"}, "url", "has an invalid port, got 'http://h:99999/'"),
        (
            {"url": "ftp://u:hunter22@h/"},
            "url",
            "must be an http:// or https:// URL, got 'ftp://u:***@h/'",
        ),
        ({"method": "GET"}, "method", "must be one of 'POST', 'PUT', got 'GET'"),
        ({"body": "json"}, "body", "must be one of 'envelope', 'array', 'raw', got 'json'"),
        ({"payload_encoding": "hex"}, "payload_encoding", "must be one of 'auto', 'base64'"),
        ({"timeout_ms": 0}, "timeout_ms", "must be between 1 and 600000, got 0"),
        ({"timeout_ms": "5s"}, "timeout_ms", "must be an integer, got '5s'"),
        ({"max_connections": True}, "max_connections", "must be an integer, got True"),
        ({"max_connections": 0}, "max_connections", "must be between 1 and 1000, got 0"),
        ({"tls_verify": "no"}, "tls_verify", "must be true or false, got 'no'"),
        ({"ca_file": "/nonexistent/ca.pem"}, "ca_file", "cannot read '/nonexistent/ca.pem'"),
        ({"ca_file": "/x.pem", "tls_verify": False}, "ca_file", "is set but tls_verify is false"),
        ({"headers": ["a"]}, "headers", "must be a table of strings"),
        ({"headers": {"Bad Name": "x"}}, "headers", "'Bad Name' is not a valid header name"),
        ({"headers": {"X-A": 1}}, "headers.X-A", "must be a string, got int"),
        ({"headers": {"X-A": "a\r\nB: c"}}, "headers.X-A", "must not contain CR, LF or NUL"),
        ({"headers": {"Content-Length": "1"}}, "headers.Content-Length", "is set by the sink"),
    ],
)
def test_settings_errors_name_the_key(table: dict[str, Any], key: str, problem: str) -> None:
    full = {"url": "http://127.0.0.1:8080/ingest", **table}
    if not table:
        full = {}
    with pytest.raises(ConfigError) as bad:
        HttpSinkSettings.from_table(full, WHERE)
    assert bad.value.key == f"{WHERE}.{key}"
    assert problem in bad.value.problem
    assert "hunter22" not in str(bad.value)


def test_settings_defaults_and_public() -> None:
    hook = settings(url="https://hooks.example/in", method="put", headers={"X-A": "b"})
    assert hook.public() == {
        "url": "https://hooks.example/in",
        "method": "PUT",
        "headers": {"X-A": "b"},
        "body": "envelope",
        "payload_encoding": "auto",
        "timeout_ms": 5000,
        "ca_file": None,
        "tls_verify": True,
        "max_connections": 8,
    }
    assert set(hook.public()) == HttpSinkSettings.KEYS


def test_the_spec_parser_takes_an_http_integration_and_names_its_keys() -> None:
    table = {"name": "hook", "type": "http", "filters": ["sensors/#"], "url": "ftp://x"}
    with pytest.raises(ConfigError) as bad:
        parse_integration(table, WHERE)
    assert bad.value.key == f"{WHERE}.url"
    spec = parse_integration({**table, "url": "http://127.0.0.1:8080/ingest"}, WHERE)
    assert isinstance(spec.settings, HttpSinkSettings)
    assert spec.public()["url"] == "http://127.0.0.1:8080/ingest"
    with pytest.raises(ConfigError) as unknown:
        parse_integration({**table, "url": "http://h/", "timeout": 5}, WHERE)
    assert unknown.value.key == f"{WHERE}.timeout"
