"""`mqttq migrate init-source` and `pg-to-redis` against a real PostgreSQL and real Redis
(standalone and a 3-master cluster): keys, values, TTLs, counters, rejects, conflicts,
dry run, verify, --clients, unreachable servers (interruptions: test_migrate_resume.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from mqttq.model import Message
from mqttq.storage.redis.queue import RedisMessageQueue
from tests.migrate.source_data import (
    DAY_MS,
    MsgRow,
    SessionRow,
    b64,
    create_source,
    insert,
    invoke,
    migrate_json,
    now_ms,
    queue,
    redis_keys,
)
from tests.postgres_fixtures import PostgresServer
from tests.services import free_port

T = now_ms()
WRAP_PROPS = '{"props":[{"k":"unit","v":"C"},{"k":"unit","v":"F"}]}'
DEFAULT_TTL_MS = 604_800_000


def standard_rows() -> tuple[list[MsgRow], list[SessionRow]]:
    """wrap: serials across the packet-id wrap, a PUBREL, MQTT 5 columns, two expired rows;
    big: 20 rows and no session row (with --limit 8: 12 trimmed); idle: a session and no
    message; other-1: one row (for --clients)."""
    wrap = [
        MsgRow("wrap", 65533, time=T, packet_id=65533, packet_type="PUBREL", qos=2,
               payload=b"\x00\x01rel"),
        MsgRow("wrap", 65534, time=T, packet_id=65534, qos=1, payload=b'{"t":21}',
               user_properties=WRAP_PROPS, retain=True, msg_expiry_interval=3600,
               payload_format_indicator=1, content_type="application/json",
               response_topic="reply/wrap", correlation_data=b"\x01\x02"),
        MsgRow("wrap", 65535, time=T, packet_id=65535, qos=2, payload=b"q2"),
        MsgRow("wrap", 65536, time=T, packet_id=1, qos=0, payload=b"after wrap"),
        MsgRow("wrap", 65537, time=T - 60_000, packet_id=2, msg_expiry_interval=10),
        MsgRow("wrap", 65538, time=T - 8 * DAY_MS, packet_id=3),
    ]  # fmt: skip
    big = [MsgRow("big", s, time=T, packet_id=s, payload=b"big%d" % s) for s in range(1, 21)]
    other = [MsgRow("other-1", 7, time=T, packet_id=7)]
    sessions = [SessionRow("wrap", 65538, 3), SessionRow("idle", 5, 5)]
    return wrap + big + other, sessions


@pytest.fixture
def source(postgres_url: str) -> str:
    create_source(postgres_url)
    messages, sessions = standard_rows()
    insert(postgres_url, messages, sessions)
    return postgres_url


def snapshot(client: redis.Redis | redis.RedisCluster) -> dict[str, Any]:
    """Every key with its value (sets as lists with scores) and its expiry time."""
    result: dict[str, Any] = {}
    for key in sorted(redis_keys(client)):
        if key.endswith("}_messages"):
            value: Any = client.zrange(key, 0, -1, withscores=True)
        else:
            value = client.get(key)
        result[key] = (value, client.pexpiretime(key))
    return result


def check_standard(client: redis.Redis | redis.RedisCluster) -> None:
    """Redis holds exactly what standard_rows() becomes with --limit 8."""
    wrap = queue(client, "wrap")
    assert [(score, member) for score, member, _ in wrap] == [
        (65533, "{wrap}_messages_65533"),
        (65534, "{wrap}_messages_65534"),
        (65535, "{wrap}_messages_65535"),
        (65536, "{wrap}_messages_1"),
    ]
    assert wrap[0][2] == {
        "clientId": "wrap", "topicName": "dev/cmd", "time": T, "qos": 2, "packetId": 65533,
        "packetType": "PUBREL", "payload": b64(b"\x00\x01rel"), "retained": False,
    }  # fmt: skip
    assert wrap[1][2] == {
        "clientId": "wrap", "topicName": "dev/cmd", "time": T, "qos": 1, "packetId": 65534,
        "packetType": "PUBLISH", "payload": b64(b'{"t":21}'), "retained": True,
        "msgExpiryInterval": 3600, "payloadFormatIndicator": 1,
        "contentType": "application/json", "responseTopic": "reply/wrap",
        "correlationData": b64(b"\x01\x02"),
        "userProperties": {"props": [{"k": "unit", "v": "C"}, {"k": "unit", "v": "F"}]},
        "expiresAt": T + 3_600_000,
    }  # fmt: skip
    assert [(m["packetId"], m["qos"], m["payload"]) for _, _, m in wrap[2:]] == [
        (65535, 2, b64(b"q2")),
        (1, 0, b64(b"after wrap")),
    ]
    # TTL: what is left of the expiry (or of the default TTL) from the row's time.
    assert client.pexpiretime("{wrap}_messages_65534") == T + 3_600_000
    assert client.pexpiretime("{wrap}_messages_1") == T + DEFAULT_TTL_MS
    big = queue(client, "big")
    assert [(score, member) for score, member, _ in big] == [
        (s, f"{{big}}_messages_{s}") for s in range(13, 21)
    ]
    assert [m["payload"] for _, _, m in big] == [b64(b"big%d" % s) for s in range(13, 21)]
    assert queue(client, "other-1") == [
        (7, "{other-1}_messages_7", {
            "clientId": "other-1", "topicName": "dev/cmd", "time": T, "qos": 1,
            "packetId": 7, "packetType": "PUBLISH", "payload": b64(b"payload"),
            "retained": False,
        }),
    ]  # fmt: skip
    counters = {
        cid: (client.get(f"{{{cid}}}_last_packet_id"), client.get(f"{{{cid}}}_last_serial_number"))
        for cid in ("wrap", "big", "idle", "other-1")
    }
    assert counters == {
        "wrap": (b"3", b"65538"),
        "big": (b"20", b"20"),
        "idle": (b"5", b"5"),
        "other-1": (b"7", b"7"),
    }
    keys = redis_keys(client)
    checkpoints = {k for k in keys if k.startswith("mqttq:migrate:checkpoint:")}
    assert len(checkpoints) == 1
    markers = {k for k in keys if k.endswith("}_migrated")}
    assert markers == {"{wrap}_migrated", "{big}_migrated", "{idle}_migrated", "{other-1}_migrated"}
    assert json.loads(client.get("{big}_migrated") or b"")["messages"] == 8
    messages = {k for k in keys if "}_messages_" in k}
    assert len(messages) == 4 + 8 + 1
    # The sets of 3 clients, 2 counters and a marker per client, the checkpoint.
    assert len(keys) == len(messages) + 3 + 4 * 3 + 1


# --- init-source ------------------------------------------------------------------------


def test_init_source_creates_tbmq_1x_tables_exactly(postgres_url: str) -> None:
    for _ in range(2):  # idempotent
        result = invoke("init-source", "--pg", postgres_url)
        assert result.exit_code == 0, result.output
        assert "device_publish_msg" in result.stdout
    as_json = json.loads(invoke("init-source", "--pg", postgres_url, "--json").stdout)
    assert as_json["tables"] == ["device_session_ctx", "device_publish_msg"]
    assert as_json["database"] == f"PostgreSQL at {postgres_url}"
    with psycopg.connect(postgres_url) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type, character_maximum_length, is_nullable "
            "FROM information_schema.columns WHERE table_schema = 'public' "
            "ORDER BY table_name, ordinal_position"
        ).fetchall()
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
            "ORDER BY indexname"
        ).fetchall()
    varchar = "character varying"
    assert columns == [
        ("device_publish_msg", "client_id", varchar, 255, "NO"),
        ("device_publish_msg", "serial_number", "bigint", None, "NO"),
        ("device_publish_msg", "topic", varchar, None, "NO"),
        ("device_publish_msg", "time", "bigint", None, "NO"),
        ("device_publish_msg", "packet_id", "integer", None, "YES"),
        ("device_publish_msg", "packet_type", varchar, 255, "YES"),
        ("device_publish_msg", "qos", "integer", None, "NO"),
        ("device_publish_msg", "payload", "bytea", None, "NO"),
        ("device_publish_msg", "user_properties", varchar, None, "YES"),
        ("device_publish_msg", "retain", "boolean", None, "YES"),
        ("device_publish_msg", "msg_expiry_interval", "integer", None, "YES"),
        ("device_publish_msg", "payload_format_indicator", "integer", None, "YES"),
        ("device_publish_msg", "content_type", varchar, 255, "YES"),
        ("device_publish_msg", "response_topic", varchar, 255, "YES"),
        ("device_publish_msg", "correlation_data", "bytea", None, "YES"),
        ("device_session_ctx", "client_id", varchar, 255, "NO"),
        ("device_session_ctx", "last_updated_time", "bigint", None, "NO"),
        ("device_session_ctx", "last_serial_number", "bigint", None, "YES"),
        ("device_session_ctx", "last_packet_id", "integer", None, "YES"),
    ]
    assert indexes == [
        (
            "device_publish_msg_pkey",
            "CREATE UNIQUE INDEX device_publish_msg_pkey ON public.device_publish_msg "
            "USING btree (client_id, serial_number)",
        ),
        (
            "device_session_ctx_pkey",
            "CREATE UNIQUE INDEX device_session_ctx_pkey ON public.device_session_ctx "
            "USING btree (client_id)",
        ),
        (
            "idx_device_publish_msg_packet_id",
            "CREATE INDEX idx_device_publish_msg_packet_id ON public.device_publish_msg "
            "USING btree (client_id, packet_id)",
        ),
    ]


# --- the migration ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["standalone", "cluster"])
def test_migration_writes_the_redis_layout_and_a_second_run_is_a_no_op(
    source: str, mode: str, request: pytest.FixtureRequest
) -> None:
    url: str = request.getfixturevalue("redis_cluster_url" if mode == "cluster" else "redis_url")
    cluster = ["--cluster"] if mode == "cluster" else []
    client: redis.Redis | redis.RedisCluster = (
        redis.RedisCluster.from_url(url) if mode == "cluster" else redis.Redis.from_url(url)
    )
    try:
        report = migrate_json("--pg", source, "--redis", url, *cluster, "--limit", "8")
        assert report["clients"] == {
            "seen": 4, "migrated": 4, "replaced": 0, "already_migrated": 0, "skipped": 0,
            "conflicts": 0, "rejected": 0,
        }  # fmt: skip
        assert report["messages"] == {
            "migrated": 13, "skipped_expired": 2, "trimmed": 12, "not_written": 0
        }  # fmt: skip
        assert (report["rows_read"], report["finished"]) == (27, True)
        check_standard(client)
        before = snapshot(client)

        again = migrate_json("--pg", source, "--redis", url, *cluster, "--limit", "8")
        assert again["clients"]["already_migrated"] == 4
        assert (again["clients"]["migrated"], again["messages"]["migrated"]) == (0, 0)
        after = snapshot(client)
        checkpoint = next(k for k in before if k.startswith("mqttq:migrate:checkpoint:"))
        del before[checkpoint], after[checkpoint]  # rewritten by every run
        assert after == before

        verified = migrate_json(
            "--pg", source, "--redis", url, *cluster, "--limit", "8", "--dry-run", "--verify"
        )
        assert verified["verify"]["ok"] is True
        assert verified["verify"]["clients_equal"] == 4
        assert verified["verify"]["messages_checked"] == 13
    finally:
        client.close()


def test_dry_run_writes_nothing(source: str, redis_url: str, raw_redis: redis.Redis) -> None:
    report = migrate_json("--pg", source, "--redis", redis_url, "--limit", "8", "--dry-run")
    assert report["dry_run"] is True
    assert report["clients"]["migrated"] == 4
    assert report["messages"] == {
        "migrated": 13, "skipped_expired": 2, "trimmed": 12, "not_written": 0
    }  # fmt: skip
    assert raw_redis.dbsize() == 0


def test_clients_pattern_is_sql_like(source: str, redis_url: str, raw_redis: redis.Redis) -> None:
    report = migrate_json("--pg", source, "--redis", redis_url, "--clients", "other-%")
    assert report["clients"]["migrated"] == 1
    assert {k.split("}")[0] for k in redis_keys(raw_redis) if k.startswith("{")} == {"{other-1"}


def test_table_output_and_progress_off_without_tty(source: str, redis_url: str) -> None:
    result = invoke("pg-to-redis", "--pg", source, "--redis", redis_url, "--limit", "8")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    lines = {" ".join(line.strip("│ ").split()) for line in result.stdout.splitlines()}
    assert "clients migrated │ 4" in lines
    assert "messages skipped (expired) │ 2" in lines
    assert "messages trimmed (over --limit 8) │ 12" in lines


# --- bad input ----------------------------------------------------------------------------


def test_bad_rows_reject_their_client_whole_and_are_all_reported(
    postgres_url: str, redis_url: str, raw_redis: redis.Redis
) -> None:
    create_source(postgres_url)
    rows = [
        MsgRow("good", 1, packet_id=1),
        MsgRow("good", 2, packet_id=2),
        MsgRow("mixed", 1, packet_id=1),
        MsgRow("mixed", 2, packet_id=2, qos=5),
        MsgRow("mixed", 3, packet_id=3, topic=""),
        MsgRow("mixed", 4, packet_id=None),
        MsgRow("mixed", 5, packet_id=9),
        MsgRow("mixed", 6, packet_id=9, packet_type="PUBREL", qos=2),
        MsgRow("mixed", 7, packet_id=10, packet_type="PUBACK"),
        MsgRow("badsession", 1, packet_id=1),
    ]
    insert(postgres_url, rows, [SessionRow("badsession", 1, 70_000)])
    result = invoke("pg-to-redis", "--pg", postgres_url, "--redis", redis_url, "--json")
    assert result.exit_code == 1
    assert result.stderr.startswith("mqttq: error: 2 client(s) rejected for 6 bad row(s)")
    report = json.loads(result.stdout)
    assert report["clients"]["rejected"] == 2
    assert report["clients"]["migrated"] == 1
    assert report["rejected"]["by_reason"] == {
        "device_session_ctx": 1, "duplicate_packet_id": 2, "packet_id": 1, "packet_type": 1,
        "qos": 1, "topic": 1,
    }  # fmt: skip
    listed = sorted(
        (p["client_id"], p["serial_number"] or 0, p["reason"]) for p in report["rejected"]["listed"]
    )
    assert listed == [
        ("badsession", 0, "device_session_ctx"),
        ("mixed", 2, "qos"),
        ("mixed", 3, "topic"),
        ("mixed", 4, "packet_id"),
        ("mixed", 5, "duplicate_packet_id"),
        ("mixed", 6, "duplicate_packet_id"),
        ("mixed", 7, "packet_type"),
    ]
    # Nothing of a rejected client is written: no partial queue.
    assert {k.split("}")[0] for k in redis_keys(raw_redis) if k.startswith("{")} == {"{good"}
    # Rows that were fine by themselves: mixed 1, 5 and 6, badsession 1.
    assert report["messages"]["not_written"] == 4

    accepted = migrate_json(
        "--pg", postgres_url, "--redis", redis_url, "--allow-rejects", expect_exit=0
    )
    assert accepted["clients"]["rejected"] == 2
    # The operator fixes the rows; the next run writes the clients it rejected before.
    with psycopg.connect(postgres_url) as conn:
        conn.execute(
            "DELETE FROM device_publish_msg WHERE client_id = 'mixed' AND serial_number > 1"
        )
        conn.execute("UPDATE device_session_ctx SET last_packet_id = 1")
    fixed = migrate_json("--pg", postgres_url, "--redis", redis_url)
    assert (fixed["clients"]["migrated"], fixed["clients"]["already_migrated"]) == (2, 1)
    assert [m["packetId"] for _, _, m in queue(raw_redis, "mixed")] == [1]


def test_values_a_damaged_source_can_hold(
    postgres_server: PostgresServer, redis_url: str, raw_redis: redis.Redis
) -> None:
    """A source whose columns lost their types and constraints (a dump restored by hand):
    a text payload, NULLs where TBMQ never wrote them."""
    url = postgres_server.create_database()
    with psycopg.connect(url) as conn:
        conn.execute(
            "CREATE TABLE device_session_ctx (client_id varchar, last_updated_time bigint, "
            "last_serial_number bigint, last_packet_id integer)"
        )
        conn.execute(
            "CREATE TABLE device_publish_msg (client_id varchar, serial_number bigint, "
            "topic varchar, time bigint, packet_id integer, packet_type varchar, qos integer, "
            "payload text, user_properties varchar, retain boolean, msg_expiry_interval "
            "integer, payload_format_indicator integer, content_type varchar, "
            "response_topic varchar, correlation_data bytea)"
        )
        conn.execute(
            "INSERT INTO device_publish_msg (client_id, serial_number, topic, time, packet_id, "
            "packet_type, qos, payload) VALUES "
            "('text-payload', 1, 't', %(t)s, 1, 'PUBLISH', 1, 'abc'), "
            "('nulls', 1, NULL, NULL, 1, 'PUBLISH', NULL, NULL), "
            "('', 1, 't', %(t)s, 1, 'PUBLISH', 1, 'x')",
            {"t": T},
        )
    report = migrate_json("--pg", url, "--redis", redis_url, expect_exit=1)
    listed = sorted(
        (p["client_id"], p["reason"], p["detail"]) for p in report["rejected"]["listed"]
    )
    assert listed == [
        ("", "client_id", "empty"),
        ("nulls", "time", "None is not a time in ms"),
        ("text-payload", "payload", "not bytea but str"),
    ]
    assert {k for k in redis_keys(raw_redis) if not k.startswith("mqttq:migrate:")} == set()


# --- conflicts ----------------------------------------------------------------------------


async def _broker_session(url: str) -> None:
    queue_store = RedisMessageQueue(url)
    await queue_store.open()
    try:
        await queue_store.enqueue([("wrap", Message("live/x", b"from the broker", 1))])
    finally:
        await queue_store.close()


def test_existing_sessions_are_never_silently_overwritten(
    source: str, redis_url: str, raw_redis: redis.Redis
) -> None:
    asyncio.run(_broker_session(redis_url))  # a live session of the Redis broker
    raw_redis.set("{idle}_last_packet_id", 77)
    before = snapshot(raw_redis)

    result = invoke("pg-to-redis", "--pg", source, "--redis", redis_url, "--limit", "8")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "mqttq: error: 2 client id(s) already have a session in Redis; nothing was written."
    )
    assert "client ids already in Redis: idle, wrap" in result.stdout
    assert snapshot(raw_redis) == before

    skipped = migrate_json(
        "--pg", source, "--redis", redis_url, "--limit", "8", "--on-conflict", "skip"
    )
    assert (skipped["clients"]["skipped"], skipped["clients"]["migrated"]) == (2, 2)
    assert [m["payload"] for _, _, m in queue(raw_redis, "wrap")] == [b64(b"from the broker")]
    assert raw_redis.get("{idle}_last_packet_id") == b"77"
    assert raw_redis.exists("{wrap}_migrated", "{idle}_migrated") == 0
    verified = migrate_json(
        "--pg", source, "--redis", redis_url, "--limit", "8", "--dry-run", "--verify",
        "--on-conflict", "skip",
    )  # fmt: skip
    assert verified["verify"]["clients_not_compared"] == 2
    assert verified["verify"]["ok"] is True

    replaced = migrate_json(
        "--pg", source, "--redis", redis_url, "--limit", "8", "--on-conflict", "replace"
    )
    assert replaced["clients"] == {
        "seen": 4, "migrated": 2, "replaced": 2, "already_migrated": 2, "skipped": 0,
        "conflicts": 0, "rejected": 0,
    }  # fmt: skip
    check_standard(raw_redis)


# --- verify -------------------------------------------------------------------------------


def test_verify_reports_every_client_that_differs(
    source: str, redis_url: str, raw_redis: redis.Redis
) -> None:
    migrate_json("--pg", source, "--redis", redis_url, "--limit", "8")
    changed = json.loads(raw_redis.get("{wrap}_messages_65534") or b"")
    changed["payload"] = b64(b"tampered")
    raw_redis.set("{wrap}_messages_65534", json.dumps(changed), keepttl=True)
    raw_redis.zrem("{big}_messages", "{big}_messages_13")
    raw_redis.delete("{idle}_migrated", "{idle}_last_packet_id", "{idle}_last_serial_number")

    result = invoke(
        "pg-to-redis", "--pg", source, "--redis", redis_url, "--limit", "8", "--dry-run",
        "--verify", "--json",
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.stderr == "mqttq: error: 3 client(s) differ in Redis\n"
    differences = {
        d["client_id"]: d["difference"] for d in json.loads(result.stdout)["verify"]["differences"]
    }
    assert differences["big"] == "count: 8 messages in PostgreSQL, 7 in Redis"
    assert differences["idle"].startswith("not migrated")
    assert differences["wrap"].startswith("message at serial 65534: payload sha256 ")


# --- unreachable servers, bad options ------------------------------------------------------


def test_unreachable_postgresql_or_redis_is_one_line(source: str, redis_url: str) -> None:
    closed = free_port()
    no_pg = invoke(
        "pg-to-redis", "--pg", f"postgresql://postgres@127.0.0.1:{closed}/x", "--redis", redis_url
    )
    assert no_pg.exit_code == 1
    where = f"postgresql://postgres@127.0.0.1:{closed}/x"
    assert no_pg.stderr.startswith(f"mqttq: error: cannot connect to PostgreSQL at {where}: ")
    assert no_pg.stderr.count("\n") == 1
    no_redis = invoke(
        "pg-to-redis", "--pg", source, "--redis", f"redis://:secret@127.0.0.1:{closed}/0"
    )
    assert no_redis.exit_code == 1
    assert no_redis.stderr.startswith(
        f"mqttq: error: cannot connect to Redis at redis://:***@127.0.0.1:{closed}/0: "
    )
    assert no_redis.stderr.count("\n") == 1
    no_tables = invoke(
        "pg-to-redis", "--pg", source.rsplit("/", 1)[0] + "/postgres", "--redis", redis_url
    )
    assert no_tables.exit_code == 1
    assert "is this TBMQ 1.x's database?" in no_tables.stderr
    assert "Traceback" not in no_pg.stderr + no_redis.stderr + no_tables.stderr


def test_limit_above_65535_is_refused(source: str, redis_url: str, tmp_path: Path) -> None:
    result = invoke("pg-to-redis", "--pg", source, "--redis", redis_url, "--limit", "65536")
    assert result.exit_code == 2
    assert result.stderr == (
        "mqttq: error: --limit 65536: the persisted messages limit must be 1..65535 "
        "(one queue holds each MQTT packet id at most once)\n"
    )
    config = tmp_path / "broker.toml"
    config.write_text(f'[mqtt]\nmax_queued_messages = 8\n[redis]\nurl = "{redis_url}"\n')
    report = migrate_json("--pg", source, "--config", str(config))
    assert report["messages"]["trimmed"] == 12
