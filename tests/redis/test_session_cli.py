"""`mqttq session` (ls, inspect, dump, trim, rm) on seeded Redis data, via typer's CliRunner.

Ages and TTLs are seeded 30 s past a whole minute, so the rendered minutes stay exact for
30 s whatever the speed of the machine; JSON ages are compared within that window too.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from typer.testing import CliRunner, Result

from mqttq.cli.session import human_duration, session_app
from mqttq.model import Message
from mqttq.storage.redis.queue import RedisMessageQueue
from tests.services import free_port

HOUR = 3600
SLACK = 30
runner = CliRunner()


def invoke(*args: str) -> Result:
    return runner.invoke(session_app, list(args), env={"COLUMNS": "120"}, catch_exceptions=False)


def seed(url: str, items: list[tuple[str, Message]], *, cluster: bool = False, **kw: Any) -> None:
    async def main() -> None:
        queue = RedisMessageQueue(url, cluster=cluster, **kw)
        await queue.open()
        try:
            await queue.enqueue(items)
        finally:
            await queue.close()

    asyncio.run(main())


def msg(payload: bytes, age: float, topic: str = "cmd/x") -> Message:
    return Message(topic, payload, qos=1, created_at=round(time.time() - age, 3))


@pytest.fixture
def seeded(redis_url: str) -> Iterator[redis.Redis]:
    """dev-a: 2 messages (2h and 1h old); dev-b: 1 message, connected; dev-c: 3 messages,
    the oldest of which was overwritten with garbage. TTLs 2h (+ slack)."""
    seed(
        redis_url,
        [
            ("dev-a", msg(b"hello", 2 * HOUR + SLACK)),
            ("dev-a", msg(b"\x00\xff", HOUR + SLACK)),
            ("dev-b", msg(b"b", 3 * 24 * HOUR + SLACK)),
            *[("dev-c", msg(b"c%d" % n, 60 * (5 - n) + SLACK)) for n in range(3)],
        ],
        default_ttl=2 * HOUR + SLACK,
    )
    raw = redis.Redis.from_url(redis_url)
    raw.set("{dev-b}_session_node", "node-1:4242")
    raw.set("{dev-c}_messages_1", "not json", keepttl=True)
    yield raw
    raw.close()


LS_TABLE = """\
┏━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━┳━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ client id ┃ pending ┃ last id ┃ oldest ┃ newest ┃   ttl ┃ node        ┃ problems               ┃
┡━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━╇━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━┩
│ dev-a     │       2 │       2 │  2h00m │  1h00m │ 2h00m │ -           │                        │
│ dev-b     │       1 │       1 │  3d00h │  3d00h │ 2h00m │ node-1:4242 │                        │
│ dev-c     │       3 │       3 │      - │  3m30s │ 2h00m │ -           │ oldest entry malformed │
└───────────┴─────────┴─────────┴────────┴────────┴───────┴─────────────┴────────────────────────┘
"""


def test_ls_lists_every_session_sorted_by_client_id(seeded: redis.Redis, redis_url: str) -> None:
    result = invoke("ls", "--redis", redis_url)
    assert result.exit_code == 0, result.output
    assert result.stdout == LS_TABLE + f"3 sessions, 6 messages in Redis at {redis_url}\n"


def test_ls_beyond_1000_sessions_prints_plain_columns(redis_url: str) -> None:
    seed(redis_url, [(f"d{n:04d}", msg(b"x", HOUR + SLACK)) for n in range(1001)])
    result = invoke("ls", "--redis", redis_url)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        "CLIENT ID  PENDING  LAST ID  OLDEST  NEWEST    TTL  NODE  PROBLEMS",
        "d0000            1        1   1h00m   1h00m  6d23h  -",
        "d0001            1        1   1h00m   1h00m  6d23h  -",
    ]
    assert lines[1001:] == [
        "d1000            1        1   1h00m   1h00m  6d23h  -",
        f"1001 sessions, 1001 messages in Redis at {redis_url}",
    ]


def test_ls_sort_and_pattern(seeded: redis.Redis, redis_url: str) -> None:
    def ids(*args: str) -> list[str]:
        result = invoke("ls", "--redis", redis_url, "--json", *args)
        assert result.exit_code == 0, result.output
        return [row["client_id"] for row in json.loads(result.stdout)]

    assert ids("--sort", "pending") == ["dev-c", "dev-a", "dev-b"]
    # dev-c's oldest entry cannot be read: its age is unknown, so it comes last.
    assert ids("--sort", "age") == ["dev-b", "dev-a", "dev-c"]
    assert ids("--pattern", "dev-[ab]") == ["dev-a", "dev-b"]
    assert ids("--pattern", "nobody*") == []


def test_ls_json(seeded: redis.Redis, redis_url: str) -> None:
    result = invoke("ls", "--redis", redis_url, "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    window = pytest.approx  # the ages and TTLs move with the clock
    assert rows == [
        {
            "client_id": "dev-a",
            "pending": 2,
            "last_packet_id": 2,
            "oldest_age_s": window(2 * HOUR + SLACK, abs=SLACK),
            "newest_age_s": window(HOUR + SLACK, abs=SLACK),
            "ttl_s": window(2 * HOUR + SLACK, abs=SLACK),
            "connected": None,
            "problems": [],
        },
        {
            "client_id": "dev-b",
            "pending": 1,
            "last_packet_id": 1,
            "oldest_age_s": window(3 * 24 * HOUR + SLACK, abs=SLACK),
            "newest_age_s": window(3 * 24 * HOUR + SLACK, abs=SLACK),
            "ttl_s": window(2 * HOUR + SLACK, abs=SLACK),
            "connected": "node-1:4242",
            "problems": [],
        },
        {
            "client_id": "dev-c",
            "pending": 3,
            "last_packet_id": 3,
            "oldest_age_s": None,
            "newest_age_s": window(3 * 60 + SLACK, abs=SLACK),
            "ttl_s": window(2 * HOUR + SLACK, abs=SLACK),
            "connected": None,
            "problems": ["oldest entry malformed"],
        },
    ]


def test_ls_reports_foreign_keys_and_carries_on(seeded: redis.Redis, redis_url: str) -> None:
    seeded.set("{junk}_messages", "a string where a zset belongs")
    seeded.delete("{dev-a}_messages_2")  # the newest entry expired
    result = invoke("ls", "--redis", redis_url, "--json")
    assert result.exit_code == 0, result.output
    rows = {row["client_id"]: row for row in json.loads(result.stdout)}
    assert sorted(rows) == ["dev-a", "dev-b", "dev-c", "junk"]
    assert rows["junk"]["problems"] == ["queue key is a string"]
    assert rows["dev-a"]["problems"] == ["newest entry expired"]
    assert rows["dev-a"]["ttl_s"] is None


def test_inspect(seeded: redis.Redis, redis_url: str) -> None:
    seeded.set("{dev-c}_session_node", "node-2:7")
    keys = ["{dev-c}_messages", "{dev-c}_last_packet_id", "{dev-c}_last_serial_number"]
    keys.append("{dev-c}_session_node")
    sizes = [seeded.memory_usage(k) or 0 for k in keys]
    messages = sum(seeded.memory_usage(f"{{dev-c}}_messages_{n}") or 0 for n in (1, 2, 3))
    total = sum(sizes) + messages

    result = invoke("inspect", "dev-c", "--redis", redis_url)
    assert result.exit_code == 0, result.output
    memory = (
        f"{total:,} bytes (messages {messages:,}, set {sizes[0]:,}, counters {sum(sizes[1:]):,})"
    )
    assert result.stdout.splitlines()[4:16] == [
        f"│ {name:<24} │ {value:<{len(memory)}} │"
        for name, value in [
            ("queue key", "{dev-c}_messages"),
            ("pending", "3 (2 PUBLISH, 0 PUBREL)"),
            ("expired references", "0"),
            ("serials", "1 .. 3"),
            ("packet ids", "2 .. 3"),
            ("last packet id (counter)", "3"),
            ("last serial (counter)", "3"),
            ("oldest message", "4m30s"),
            ("newest message", "3m30s"),
            ("ttl", "2h00m .. 2h00m"),
            ("connected", "node-2:7"),
            ("memory", memory),
        ]
    ]
    assert "│ {dev-c}_messages_1 │ stored message is not valid JSON" in result.stdout

    data = json.loads(invoke("inspect", "dev-c", "--redis", redis_url, "--json").stdout)
    assert {k: v for k, v in data.items() if not k.endswith("_s")} == {
        "client_id": "dev-c",
        "keys": {
            "messages": "{dev-c}_messages",
            "last_packet_id": "{dev-c}_last_packet_id",
            "last_serial": "{dev-c}_last_serial_number",
            "session_node": "{dev-c}_session_node",
        },
        "pending": 3,
        "publish": 2,
        "pubrel": 0,
        "missing": 0,
        "first_serial": 1,
        "last_serial": 3,
        "first_packet_id": 2,
        "last_packet_id": 3,
        "last_packet_id_counter": 3,
        "last_serial_counter": 3,
        "connected": "node-2:7",
        "memory_bytes": {
            "queue_set": sizes[0],
            "counters": sum(sizes[1:]),
            "messages": messages,
            "total": total,
        },
        "problems": [
            {
                "key": "{dev-c}_messages_1",
                "error": "stored message is not valid JSON: Expecting value: line 1 column 1 "
                "(char 0)",
            }
        ],
    }
    assert data["oldest_age_s"] == pytest.approx(4 * 60 + SLACK, abs=SLACK)


def test_inspect_and_dump_of_an_unknown_client(seeded: redis.Redis, redis_url: str) -> None:
    for command in ("inspect", "dump"):
        result = invoke(command, "nobody", "--redis", redis_url)
        assert result.exit_code == 1
        assert result.stdout == ""
    assert invoke("inspect", "nobody", "--redis", redis_url).stderr == (
        f"mqttq: error: no session of client 'nobody' in Redis at {redis_url}\n"
    )


def test_dump(seeded: redis.Redis, redis_url: str) -> None:
    stored = [json.loads(seeded.get(f"{{dev-a}}_messages_{n}") or b"") for n in (1, 2)]
    result = invoke("dump", "dev-a", "--redis", redis_url)
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines == [
        {"serial": 1, "key": "{dev-a}_messages_1"} | stored[0],
        {"serial": 2, "key": "{dev-a}_messages_2"} | stored[1],
    ]
    assert lines[0]["payload"] == "aGVsbG8="
    assert list(lines[0])[:4] == ["serial", "key", "clientId", "topicName"]

    decoded = [
        json.loads(line)
        for line in invoke("dump", "dev-a", "--redis", redis_url, "--decode").stdout.splitlines()
    ]
    assert [(d["payload"], d["payloadEncoding"]) for d in decoded] == [
        ("hello", "utf-8"),
        ("AP8=", "base64"),  # b"\x00\xff" is not UTF-8
    ]

    malformed = invoke("dump", "dev-c", "--redis", redis_url, "--decode")
    assert malformed.exit_code == 0
    first, second, third = (json.loads(line) for line in malformed.stdout.splitlines())
    assert first == {
        "serial": 1,
        "key": "{dev-c}_messages_1",
        "error": "stored message is not valid JSON: Expecting value: line 1 column 1 (char 0)",
        "raw": "not json",
    }
    assert (second["payload"], third["payload"]) == ("c1", "c2")


def test_trim(seeded: redis.Redis, redis_url: str) -> None:
    result = invoke("trim", "dev-c", "--keep", "1", "--redis", redis_url)
    assert result.exit_code == 0, result.output
    assert result.stdout == "client 'dev-c': removed 2 messages, 1 left\n"
    assert seeded.zrange("{dev-c}_messages", 0, -1) == [b"{dev-c}_messages_3"]
    assert seeded.exists("{dev-c}_messages_1", "{dev-c}_messages_2") == 0
    assert seeded.get("{dev-c}_last_packet_id") == b"3"  # counters stay

    again = invoke("trim", "dev-c", "--keep", "5", "--redis", redis_url, "--json")
    assert json.loads(again.stdout) == {"client_id": "dev-c", "removed": 0, "left": 1}
    assert invoke("trim", "dev-c", "--keep", "-1", "--redis", redis_url).exit_code == 2


def test_rm_refuses_a_connected_client_unless_forced(seeded: redis.Redis, redis_url: str) -> None:
    refused = invoke("rm", "dev-b", "--redis", redis_url)
    assert refused.exit_code == 1
    assert refused.stderr == (
        "mqttq: error: client 'dev-b' is connected (to node-1:4242); "
        "disconnect it first, or use --force\n"
    )
    assert seeded.exists("{dev-b}_messages") == 1

    forced = invoke("rm", "dev-b", "--redis", redis_url, "--force", "--json")
    assert forced.exit_code == 0, forced.output
    assert json.loads(forced.stdout) == {"client_id": "dev-b", "messages": 1, "keys": 5}
    assert seeded.keys("{dev-b}*") == []

    removed = invoke("rm", "dev-a", "--redis", redis_url)
    assert removed.stdout == "client 'dev-a': removed 2 messages (5 keys)\n"
    assert seeded.keys("{dev-a}*") == []
    gone = invoke("rm", "dev-a", "--redis", redis_url)
    assert gone.exit_code == 1
    assert gone.stderr == f"mqttq: error: no session of client 'dev-a' in Redis at {redis_url}\n"


@pytest.mark.parametrize("command", [["ls"], ["inspect", "x"], ["dump", "x"], ["rm", "x"]])
def test_unreachable_redis_is_one_line_and_exit_1(command: list[str]) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    result = invoke(*command, "--redis", url)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"mqttq: error: cannot reach Redis at {url}: Error 111")
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


def test_config_file_and_key_prefix_on_a_cluster(redis_cluster_url: str, tmp_path: Path) -> None:
    clients = [f"c{n}" for n in range(40)]  # spread over the slots of all three masters
    seed(
        redis_cluster_url,
        [(c, msg(b"x", 60)) for c in clients],
        cluster=True,
        key_prefix="tb:",
    )
    config = tmp_path / "broker.toml"
    config.write_text(f'[redis]\nurl = "{redis_cluster_url}"\ncluster = true\nkey_prefix = "tb:"\n')

    listed = invoke("ls", "--config", str(config), "--json")
    assert listed.exit_code == 0, listed.output
    assert [row["client_id"] for row in json.loads(listed.stdout)] == sorted(clients)
    # Without the prefix nothing matches; the flag wins over the file.
    assert (
        json.loads(invoke("ls", "--config", str(config), "--key-prefix", "", "--json").stdout) == []
    )

    inspected = json.loads(invoke("inspect", "c7", "--config", str(config), "--json").stdout)
    assert (inspected["pending"], inspected["keys"]["messages"]) == (1, "tb:{c7}_messages")
    dumped = invoke("dump", "c7", "--config", str(config), "--decode")
    assert json.loads(dumped.stdout)["payload"] == "x"
    assert invoke("rm", "c7", "--config", str(config)).exit_code == 0
    trimmed = invoke("trim", "c8", "--keep", "0", "--config", str(config), "--json")
    assert json.loads(trimmed.stdout) == {"client_id": "c8", "removed": 1, "left": 0}
    rows = json.loads(invoke("ls", "--config", str(config), "--json").stdout)
    assert len(rows) == 38


def test_a_bad_config_file_is_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text("[redis]\ncluster = 'yes'\n")
    result = invoke("ls", "--config", str(config))
    assert result.exit_code == 2
    # Checked as `mqttq serve` checks it (mqttq.config), naming the file.
    assert result.stderr == (
        "mqttq: error: config key 'redis.cluster': expected true or false, got string 'yes' "
        f"(in {config})\n"
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0.9, "0s"), (59, "59s"), (61, "1m01s"), (7230, "2h00m"), (90061, "1d01h")],
)
def test_human_duration(seconds: float | None, text: str) -> None:
    assert human_duration(seconds) == text
