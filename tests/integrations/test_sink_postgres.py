"""The `postgres` sink against the suite's real PostgreSQL (tests/postgres_fixtures.py):
the rows the server holds after each batch, in order and with their types; the poison
rows refused while the rest land; the server gone and back; the table created on request;
JSON fields into columns; settings errors naming the key; secrets kept out of sight."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import psycopg
import pytest

from mqttq.errors import ConfigError
from mqttq.integrations.record import Delivery
from mqttq.integrations.sink import Rejected, SinkRejected, SinkUnavailable
from mqttq.integrations.sinks.postgres import PostgresSink, PostgresSinkSettings
from tests.integrations.postgres_relay import TcpRelay
from tests.postgres_fixtures import PostgresServer
from tests.services import free_port

T = TypeVar("T")
WHERE = "integration[0]"
T0 = 1_795_000_000_000  # 2026-11-18T11:06:40Z, in unix milliseconds

MODES = pytest.mark.parametrize("insert", ["copy", "executemany"])


def run(coro: Awaitable[T]) -> T:
    async def main() -> T:
        return await coro

    return asyncio.run(main())


def settings(url: str, **keys: Any) -> PostgresSinkSettings:
    return PostgresSinkSettings.from_table({"url": url, **keys}, WHERE)


def delivery(n: int, payload: bytes | str, **fields: Any) -> Delivery:
    body = payload.encode() if isinstance(payload, str) else payload
    base: dict[str, Any] = {
        "topic": f"sensors/{n}",
        "client_id": f"dev-{n}",
        "timestamp_ms": T0 + n,
        "seq": n,
    }
    return Delivery(payload=body, **{**base, **fields})


def rows(url: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query).fetchall()


def execute(url: str, statement: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement)


async def with_sink(
    config: PostgresSinkSettings, work: Callable[[PostgresSink], Awaitable[T]]
) -> T:
    sink = PostgresSink(config, "pg")
    try:
        return await work(sink)
    finally:
        await sink.close()


def send(config: PostgresSinkSettings, *batches: Sequence[Delivery]) -> list[list[Rejected]]:
    async def work(sink: PostgresSink) -> list[list[Rejected]]:
        await sink.open()
        return [list(await sink.send(batch)) for batch in batches]

    return run(with_sink(config, work))


READINGS = """CREATE TABLE readings (
    id bigserial PRIMARY KEY,
    seq bigint NOT NULL,
    topic text NOT NULL,
    qos smallint NOT NULL,
    retain boolean NOT NULL,
    at timestamptz NOT NULL,
    body jsonb,
    temp double precision CHECK (temp < 100)
)"""
READINGS_COLUMNS = {
    "seq": "seq",
    "topic": "topic",
    "qos": "qos",
    "retain": "retain",
    "at": "timestamp",
    "body": "payload",
    "temp": "payload.temp",
}


@MODES
def test_a_batch_lands_in_order_with_the_columns_types(postgres_url: str, insert: str) -> None:
    execute(postgres_url, READINGS)
    config = settings(postgres_url, table="readings", columns=READINGS_COLUMNS, insert=insert)
    first = [delivery(n, json.dumps({"temp": 20 + n, "n": n}), qos=n % 2) for n in range(50)]
    second = [delivery(n, json.dumps({"temp": 1.5}), retain=True) for n in range(50, 60)]

    assert send(config, first, second) == [[], []]

    found = rows(
        postgres_url, "SELECT seq, topic, qos, retain, at, body, temp FROM readings ORDER BY id"
    )
    assert [row[0] for row in found] == list(range(60))
    assert found[7] == (
        7,
        "sensors/7",
        1,
        False,
        datetime.fromtimestamp((T0 + 7) / 1000, UTC),
        {"temp": 27, "n": 7},
        27.0,
    )
    assert found[55][3] is True
    assert found[55][6] == 1.5


@MODES
def test_poison_rows_are_rejected_and_the_rest_land_in_order(
    postgres_url: str, insert: str
) -> None:
    execute(postgres_url, READINGS)
    config = settings(postgres_url, table="readings", columns=READINGS_COLUMNS, insert=insert)
    batch = [
        delivery(0, '{"temp": 1}'),
        delivery(1, '{"temp": 500}'),  # violates CHECK (temp < 100)
        delivery(2, '{"temp": 2}'),
        delivery(3, "not json"),  # the jsonb column takes only JSON: refused before the server
        delivery(4, '{"temp": "hot"}'),  # not a double precision
        delivery(5, '{"temp": 5}'),
    ]

    (rejected,) = send(config, batch)

    assert [r.delivery.seq for r in rejected] == [1, 3, 4]
    assert "check constraint" in rejected[0].reason
    assert rejected[0].reason.startswith("23514 ")
    assert rejected[1].reason == "the payload is not JSON, which a jsonb column needs"
    assert rejected[2].reason.startswith("22P02 ")  # invalid_text_representation
    assert all("\n" not in r.reason for r in rejected)
    assert rows(postgres_url, "SELECT seq, temp FROM readings ORDER BY id") == [
        (0, 1.0),
        (2, 2.0),
        (5, 5.0),
    ]


LEDGER = "CREATE TABLE ledger (source text, seq bigint, topic text, UNIQUE (source, seq))"
LEDGER_COLUMNS = {"source": "integration", "seq": "seq", "topic": "topic"}


@MODES
def test_a_redelivered_batch_is_written_once_with_on_conflict_ignore(
    postgres_url: str, insert: str
) -> None:
    execute(postgres_url, LEDGER)
    execute(postgres_url, "INSERT INTO ledger VALUES ('other', 2, 'x')")
    config = settings(
        postgres_url, table="ledger", columns=LEDGER_COLUMNS, insert=insert, on_conflict="ignore"
    )
    first = [delivery(n, "a") for n in range(3)]
    again = [*first[1:], *(delivery(n, "b") for n in range(3, 5))]

    assert send(config, first, again) == [[], []]

    assert rows(postgres_url, "SELECT source, seq FROM ledger ORDER BY source, seq") == [
        ("other", 2),
        *(("pg", n) for n in range(5)),
    ]


@MODES
def test_a_duplicate_is_rejected_by_default(postgres_url: str, insert: str) -> None:
    execute(postgres_url, LEDGER)
    config = settings(postgres_url, table="ledger", columns=LEDGER_COLUMNS, insert=insert)

    _, (rejected,) = send(config, [delivery(1, "a")], [delivery(0, "b"), delivery(1, "b")])

    assert rejected.delivery.seq == 1
    assert rejected.reason.startswith("23505 duplicate key value violates unique constraint")
    assert rows(postgres_url, "SELECT seq FROM ledger ORDER BY seq") == [(0,), (1,)]


def test_the_default_table_is_created_and_keeps_every_payload(postgres_url: str) -> None:
    config = settings(postgres_url, table="mqtt.messages", create_table=True)
    execute(postgres_url, "CREATE SCHEMA mqtt")
    batch = [
        delivery(1, '{"t": 21.5}', tenant="acme", retain=True),
        delivery(2, b"\xff\x00binary"),
        delivery(3, "plain text", qos=0),
    ]

    assert send(config, batch) == [[]]

    types = rows(
        postgres_url,
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_schema = 'mqtt' AND table_name = 'messages' ORDER BY ordinal_position",
    )
    assert types == [
        ("topic", "text", "NO"),
        ("client_id", "text", "NO"),
        ("tenant", "text", "NO"),
        ("qos", "smallint", "NO"),
        ("retain", "boolean", "NO"),
        ("received_at", "timestamp with time zone", "NO"),
        ("payload", "jsonb", "YES"),
        ("payload_raw", "bytea", "YES"),
    ]
    found = rows(postgres_url, "SELECT * FROM mqtt.messages ORDER BY received_at")
    at = datetime.fromtimestamp((T0 + 1) / 1000, UTC)
    assert found[0] == ("sensors/1", "dev-1", "acme", 1, True, at, {"t": 21.5}, None)
    assert found[1][6:] == (None, b"\xff\x00binary")
    assert found[2][3] == 0
    assert found[2][6:] == (None, b"plain text")
    # Opening again (another node, a restart) finds the table and keeps its rows.
    assert send(config, [delivery(4, "[1, 2]")]) == [[]]
    assert rows(postgres_url, "SELECT count(*), count(payload) FROM mqtt.messages") == [(4, 2)]


def test_json_fields_and_user_properties_fill_their_columns(postgres_url: str) -> None:
    execute(
        postgres_url,
        "CREATE TABLE points (device text NOT NULL, temp numeric, first int, ok boolean, "
        "unit text, meta jsonb, raw bytea, txt text)",
    )
    columns = {
        "device": "payload.device",
        "temp": "payload.reading.temp",
        "first": "payload.values.0",
        "ok": "payload.ok",
        "unit": "user_property.unit",
        "meta": "payload.reading",
        "raw": "payload",
        "txt": "payload",
    }
    config = settings(postgres_url, table="points", columns=columns)
    body = {"device": "d1", "reading": {"temp": 21.25, "unit": "C"}, "values": [7, 8], "ok": True}
    good = delivery(1, json.dumps(body), user_properties=(("unit", "C"), ("unit", "F")))
    sparse = delivery(2, '{"device": "d2"}')
    no_device = delivery(3, '{"reading": {"temp": 1}}')  # device is NOT NULL
    not_utf8 = delivery(4, b'{"device": "\xff"}')  # the text column needs UTF-8

    (rejected,) = send(config, [good, sparse, no_device, not_utf8])

    assert [(r.delivery.seq, r.reason[:6]) for r in rejected] == [(3, "23502 "), (4, "the pa")]
    assert rows(postgres_url, "SELECT * FROM points ORDER BY device") == [
        (
            "d1",
            21.25,
            7,
            True,
            "C",
            {"temp": 21.25, "unit": "C"},
            json.dumps(body).encode(),
            json.dumps(body),
        ),
        ("d2", None, None, None, None, None, b'{"device": "d2"}', '{"device": "d2"}'),
    ]


def test_the_server_gone_is_unavailable_and_the_batch_lands_when_it_is_back(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    execute(postgres_url, READINGS)
    dbname = postgres_url.rsplit("/", 1)[1]

    async def scenario() -> list[str]:
        relay = TcpRelay(postgres_server.port)
        await relay.start()
        url = f"postgresql://postgres@127.0.0.1:{relay.port}/{dbname}"
        config = settings(url, table="readings", columns=READINGS_COLUMNS)
        sink = PostgresSink(config, "pg")
        errors = []
        try:
            await sink.open()
            assert await sink.send([delivery(0, '{"temp": 0}')]) == []
            await relay.stop()
            for _ in range(2):  # the broken connection, then a refused reconnect
                with pytest.raises(SinkUnavailable) as caught:
                    await sink.send([delivery(1, '{"temp": 1}'), delivery(2, '{"temp": 2}')])
                errors.append(str(caught.value))
            await relay.start()
            assert await sink.send([delivery(1, '{"temp": 1}'), delivery(2, '{"temp": 2}')]) == []
        finally:
            await sink.close()
            await relay.stop()
        return errors

    errors = run(scenario())

    assert all(e.startswith("postgres 127.0.0.1:") and "\n" not in e for e in errors)
    assert "Connection refused" in errors[1]
    assert rows(postgres_url, "SELECT seq FROM readings ORDER BY id") == [(0,), (1,), (2,)]


def test_a_server_that_is_not_there_is_unavailable_without_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PG_SINK_TEST_PASSWORD", "s3cret-Pw")
    url = f"postgresql://writer:${{PG_SINK_TEST_PASSWORD}}@127.0.0.1:{free_port()}/db"
    config = settings(url, table="readings")
    sink = PostgresSink(config, "pg")

    with pytest.raises(SinkUnavailable) as opening:
        run(sink.open())
    with pytest.raises(SinkUnavailable) as sending:
        run(sink.send([delivery(1, "x")]))

    for error in (opening.value, sending.value):
        assert "Connection refused" in str(error)
        assert "s3cret-Pw" not in str(error)
        assert "\n" not in str(error)


def test_secrets_are_expanded_at_open_and_never_shown(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The suite's server trusts every connection: the password is sent and ignored.
    url = postgres_url.replace("postgres@", "postgres:${PG_SINK_TEST_PASSWORD}@")
    url += "?application_name=${PG_SINK_TEST_APP}"
    config = settings(url, table="${PG_SINK_TEST_TABLE}", columns={"topic": "topic"})
    public = config.public()
    assert public["url"].startswith("postgresql://postgres:***@127.0.0.1:")
    assert public["url"].endswith("?application_name=${PG_SINK_TEST_APP}")
    assert public["table"] == "${PG_SINK_TEST_TABLE}"

    with pytest.raises(SinkUnavailable) as unset:
        run(PostgresSink(config, "pg").open())
    assert str(unset.value) == (
        "config key 'integration[pg].url': environment variable PG_SINK_TEST_PASSWORD is not set"
    )

    monkeypatch.setenv("PG_SINK_TEST_PASSWORD", "s3cret-Pw")
    monkeypatch.setenv("PG_SINK_TEST_APP", "mqttq-sink")
    monkeypatch.setenv("PG_SINK_TEST_TABLE", "expanded")
    execute(
        postgres_url,
        "CREATE TABLE expanded (topic text, app text DEFAULT current_setting('application_name'))",
    )
    assert send(config, [delivery(1, "x")]) == [[]]
    assert rows(postgres_url, "SELECT topic, app FROM expanded") == [("sensors/1", "mqttq-sink")]
    assert config.public() == public
    literal = settings("postgresql://u:plain-pw@h/db?password=other-pw&sslmode=require", table="t")
    assert literal.public()["url"] == "postgresql://u:***@h/db?password=***&sslmode=require"


def test_a_missing_table_is_unavailable_until_it_exists(postgres_url: str) -> None:
    config = settings(postgres_url, table="later", columns={"topic": "topic", "seq": "seq"})

    async def scenario() -> str:
        sink = PostgresSink(config, "pg")
        try:
            with pytest.raises(SinkUnavailable) as missing:
                await sink.send([delivery(1, "x")])
            execute(postgres_url, "CREATE TABLE later (topic text, seq bigint)")
            assert await sink.send([delivery(1, "x")]) == []
            return str(missing.value)
        finally:
            await sink.close()

    message = run(scenario())

    assert message.endswith(": table later does not exist; create it or set create_table = true")
    assert rows(postgres_url, "SELECT topic, seq FROM later") == [("sensors/1", 1)]


def test_a_column_missing_from_the_table_is_unavailable(postgres_url: str) -> None:
    execute(postgres_url, "CREATE TABLE narrow (topic text)")
    config = settings(postgres_url, table="narrow", columns={"topic": "topic", "who": "client_id"})

    with pytest.raises(SinkUnavailable) as caught:
        run(PostgresSink(config, "pg").open())

    assert str(caught.value).endswith(": table narrow has no column who; add it or change columns")


def test_probe_writes_nothing_and_says_what_the_server_answered(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    execute(postgres_url, READINGS)
    config = settings(postgres_url, table="readings", columns=READINGS_COLUMNS)

    async def scenario() -> tuple[str, str, str]:
        sink = PostgresSink(config, "pg")
        try:
            answer = await sink.probe(delivery(1, '{"temp": 3}'))
            with pytest.raises(SinkRejected) as poison:
                await sink.probe(delivery(2, '{"temp": 300}'))
            with pytest.raises(SinkRejected) as not_json:
                await sink.probe(delivery(3, "text"))
            return answer, str(poison.value), str(not_json.value)
        finally:
            await sink.close()

    answer, poison, not_json = run(scenario())

    dbname = postgres_url.rsplit("/", 1)[1]
    at = f"127.0.0.1:{postgres_server.port}/{dbname}"
    assert answer.startswith("PostgreSQL ")
    assert answer.endswith(f' at {at}: 1 row accepted by "readings" (rolled back)')
    assert poison.startswith(f"postgres {at}: 23514 ")
    assert "check constraint" in poison
    assert not_json == f"postgres {at}: the payload is not JSON, which a jsonb column needs"
    assert rows(postgres_url, "SELECT count(*) FROM readings") == [(0,)]
    unreachable = settings(f"postgresql://postgres@127.0.0.1:{free_port()}/x", table="readings")
    with pytest.raises(SinkUnavailable):
        run(with_sink(unreachable, lambda sink: sink.probe(delivery(1, "{}"))))


def test_the_common_keys_are_left_to_the_spec() -> None:
    table = {
        "name": "pg",
        "type": "postgres",
        "filters": ["sensors/#"],
        "batch_size": 10,
        "url": "postgres://u@h/db",
        "table": "public.readings",
    }

    config = PostgresSinkSettings.from_table(table, WHERE)

    assert config.public() == {
        "url": "postgres://u@h/db",
        "table": "public.readings",
        "columns": {
            "topic": "topic",
            "client_id": "client_id",
            "tenant": "tenant",
            "qos": "qos",
            "retain": "retain",
            "received_at": "timestamp",
            "payload": "payload_json",
            "payload_raw": "payload_raw",
        },
        "create_table": False,
        "insert": "copy",
        "on_conflict": "reject",
        "timeout_ms": 30000,
    }
    assert "url" in PostgresSinkSettings.KEYS
    assert "name" not in PostgresSinkSettings.KEYS


BAD: list[tuple[Mapping[str, Any], str, str]] = [
    ({"url": "ftp://x", "table": "t"}, "url", "must be a postgresql:// URL, got 'ftp://x'"),
    ({"url": "postgresql://u:pw@h/d", "table": "a.b.c"}, "table", "got 'a.b.c'"),
    ({"url": "postgresql://u:pw@h/d", "table": "t; drop"}, "table", "got 't; drop'"),
    ({"url": "postgresql://u:pw@h/d"}, "table", "must be a table name (string), got None"),
    (
        {"url": "postgresql://u:pw@h/d", "table": "t", "columns": {"x": "nope"}},
        "columns.x",
        "unknown source 'nope'; one of topic, client_id",
    ),
    (
        {"url": "postgresql://u:pw@h/d", "table": "t", "columns": {"bad-name": "topic"}},
        "columns.bad-name",
        "a column name is a letter",
    ),
    (
        {"url": "postgresql://u:pw@h/d", "table": "t", "columns": {"x": "payload.a..b"}},
        "columns.x",
        "'payload.a..b' needs a name after 'payload.'",
    ),
    ({"url": "postgresql://u:pw@h/d", "table": "t", "columns": {}}, "columns", "column = source"),
    (
        {"url": "postgresql://u:pw@h/d", "table": "t", "insert": "bulk"},
        "insert",
        'must be "copy" or "executemany", got \'bulk\'',
    ),
    (
        {"url": "postgresql://u:pw@h/d", "table": "t", "create_table": "yes"},
        "create_table",
        "must be true or false, got 'yes'",
    ),
    (
        {"url": "postgresql://u:pw@h/d", "table": "t", "on_conflict": "update"},
        "on_conflict",
        'must be "reject" or "ignore", got \'update\'',
    ),
    (
        {"url": "postgresql://u:pw@h/d", "table": "t", "timeout_ms": 0},
        "timeout_ms",
        "must be a positive integer, got 0",
    ),
]


@pytest.mark.parametrize(("table", "key", "problem"), BAD)
def test_a_bad_setting_names_its_key(table: Mapping[str, Any], key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        PostgresSinkSettings.from_table(table, WHERE)

    assert caught.value.key == f"{WHERE}.{key}"
    assert problem in caught.value.problem
    assert "pw" not in str(caught.value)


def test_a_bad_url_is_shown_without_its_password() -> None:
    with pytest.raises(ConfigError) as caught:
        PostgresSinkSettings.from_table({"url": "mysql://u:hunter2@h/d", "table": "t"}, WHERE)

    assert caught.value.problem == "must be a postgresql:// URL, got 'mysql://u:***@h/d'"


def test_a_server_that_never_answers_is_unavailable_after_timeout_ms() -> None:
    async def scenario() -> tuple[int, str]:
        accepted: list[asyncio.StreamWriter] = []

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)  # takes the connection and never answers

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port: int = server.sockets[0].getsockname()[1]
        config = settings(f"postgresql://postgres@127.0.0.1:{port}/x", table="t", timeout_ms=200)
        try:
            with pytest.raises(SinkUnavailable) as caught:
                await with_sink(config, lambda sink: sink.send([delivery(1, "x")]))
            return port, str(caught.value)
        finally:
            server.close()
            for writer in accepted:
                writer.transport.abort()
            await asyncio.sleep(0)  # let the aborted transports close

    port, message = run(scenario())

    assert message == f"postgres 127.0.0.1:{port}/x: no answer within 0.2 s"
