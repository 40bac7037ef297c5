"""`mqttq integration ls|show|add|rm|pause|resume|test` as a user runs it (a subprocess,
issue 33): through a running broker's admin API (a real AdminServer with an
IntegrationManager, real HTTP receivers as sinks), and straight on the SQLite integration
store when no broker runs."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqttq.integrations.stores.sqlite import SqliteIntegrationStore
from tests.admin.test_admin_integrations import TOKEN, Stack, stack
from tests.integrations.http_receivers import Receiver

CLI_DEADLINE = 60.0
"""Bounds a hung command, not its speed."""
LS_KEYS = {"name", "type", "state", "delivered", "failed", "dead_lettered", "lag"}


@dataclass
class Run:
    """A finished `mqttq` command."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.code == 0, self
        return json.loads(self.stdout)

    def error(self, code: int) -> str:
        """The one error line of a command that exited `code` (no traceback, no stdout)."""
        assert self.code == code, self
        assert "Traceback" not in self.stderr, self.stderr
        lines = [line for line in self.stderr.splitlines() if line.startswith("mqttq: error:")]
        assert len(lines) == 1, self.stderr
        assert self.stdout == "", self.stdout
        return lines[0]


def run_cli(*args: str, env: dict[str, str] | None = None) -> Run:
    """`python -m mqttq ARGS` with no MQTTQ_* variable of the test run but MQTTQ_PURE."""
    clean = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("MQTTQ_") or key == "MQTTQ_PURE"
    }
    clean.update(env or {})
    done = subprocess.run(
        [sys.executable, "-m", "mqttq", *args],
        capture_output=True,
        text=True,
        env=clean,
        timeout=CLI_DEADLINE,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def through_api(tmp_path: Path, scenario: Callable[[Stack, Any], Awaitable[None]]) -> None:
    """Run `scenario(stack, cli)` with a broker's admin API up; `cli(*args)` runs the
    command against it (in a thread, so that the API keeps serving)."""

    async def main() -> None:
        async with stack(tmp_path) as s:

            async def cli(*args: str) -> Run:
                given = [*args, "--admin-url", s.server.url, "--data-dir", str(tmp_path / "d")]
                return await asyncio.to_thread(run_cli, *given, env={"MQTTQ_ADMIN_TOKEN": TOKEN})

            await scenario(s, cli)

    asyncio.run(main())


def test_through_the_admin_api(tmp_path: Path) -> None:
    async def scenario(s: Stack, cli: Any) -> None:
        async with Receiver() as receiver, Receiver(default=503) as failing:
            added = await cli(
                "integration", "add", "hook", "--type", "http",
                "--filter", "sensors/#", "--filter", "alerts/+",
                "--set", f"url={receiver.url()}",
                "--set", "headers.Authorization=Bearer ${HOOK_TOKEN}",
                "--set", "headers.X-Team=ops",
                "--set", "batch_size=10",
                "--json",
            )  # fmt: skip
            status = added.json()
            assert status["filters"] == ["sensors/#", "alerts/+"]
            assert status["batch_size"] == 10
            assert status["headers"] == {"Authorization": "***", "X-Team": "ops"}
            assert "via admin API" in added.stderr
            # Live: the manager runs it, the store holds the template as typed.
            assert s.manager.names() == ["hook"]
            stored = {item.name: item for item in await s.store.load()}
            assert stored["hook"].table["headers"]["Authorization"] == "Bearer ${HOOK_TOKEN}"

            listed = (await cli("integration", "ls", "--json")).json()
            assert [item["name"] for item in listed] == ["hook"]
            assert set(listed[0]) >= LS_KEYS
            assert listed[0]["delivered"] == 0 and listed[0]["lag"] == 0
            # The broker's environment has no HOOK_TOKEN: its sink cannot start, and ls says so.
            assert listed[0]["state"] == "failed"
            assert "HOOK_TOKEN" in listed[0]["last_error"]

            table = await cli("integration", "ls")
            assert table.code == 0 and "hook" in table.stdout and "1 integration" in table.stdout

            shown = await cli("integration", "show", "hook")
            assert shown.code == 0 and "Bearer" not in shown.stdout and "***" in shown.stdout

            assert (
                await cli(
                    "integration", "add", "down", "--type", "http", "--filter", "x/#",
                    "--set", f"url={failing.url()}",
                )
            ).code == 0  # fmt: skip
            env_needed = await cli("integration", "test", "hook")
            assert "HOOK_TOKEN" in env_needed.error(2)  # the broker's env lacks it

            assert (
                await cli("integration", "add", "ok", "--type", "http", "--filter", "x/#",
                          "--set", f"url={receiver.url()}")
            ).code == 0  # fmt: skip
            paused = (await cli("integration", "pause", "ok", "--json")).json()
            assert paused["state"] == "paused"
            said = await cli("integration", "resume", "ok")
            assert said.code == 0 and "resumed" in said.stdout
            assert s.manager.status("ok")["state"] != "paused"
            tested = await cli("integration", "test", "ok")
            assert tested.code == 0 and "200" in tested.stdout
            assert receiver.received[-1].json()["client_id"] == "mqttq-integration-test"
            refused = await cli("integration", "test", "down")
            line = refused.error(2)  # an unreachable or refusing sink is bad input
            assert "integration.url: integration 'down' test failed" in line
            assert "503" in line

            removed = await cli("integration", "rm", "ok")
            assert removed.code == 0 and "removed" in removed.stdout
            assert "ok" not in s.manager.names()
            assert "no integration named 'ok'" in (await cli("integration", "rm", "ok")).error(1)
            assert "no integration" in (await cli("integration", "show", "ok")).error(1)

    through_api(tmp_path, scenario)


def test_bad_input_is_one_line_naming_the_field(tmp_path: Path) -> None:
    async def scenario(s: Stack, cli: Any) -> None:
        async with Receiver() as receiver:
            url = f"url={receiver.url()}"
            cases = [
                (["--type", "http", "--filter", "a/#/b", "--set", url], "integration.filters"),
                (["--type", "smtp", "--filter", "a/#", "--set", url], "integration.type"),
                (["--type", "http", "--filter", "a/#", "--set", "url=ftp://x/"], "integration.url"),
                (["--type", "http", "--filter", "a/#", "--set", url, "--set", "nope=1"], "nope"),
                (["--type", "http", "--filter", "a/#", "--set", "url"], "--set"),
                (["--filter", "a/#", "--set", url], "--type"),
            ]
            for args, field in cases:
                line = (await cli("integration", "add", "bad", *args)).error(2)
                assert field in line, line
            assert s.manager.names() == []
            ok = ["--type", "http", "--filter", "a/#", "--set", url]
            assert (await cli("integration", "add", "one", *ok)).code == 0
            taken = (await cli("integration", "add", "one", *ok)).error(1)
            assert "exists already" in taken

    through_api(tmp_path, scenario)


def stored(data_dir: Path) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        store = SqliteIntegrationStore.in_data_dir(data_dir)
        await store.open()
        try:
            return {item.name: item for item in await store.load()}
        finally:
            await store.close()

    return asyncio.run(read())


def test_without_a_broker_the_store_is_edited(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    where = ["--data-dir", str(data_dir)]
    empty = run_cli("integration", "ls", "--json", *where)
    assert empty.json() == []
    assert not (data_dir / "auth.db").exists()  # reading creates nothing

    added = run_cli(
        "integration", "add", "hook", "--type", "http", "--filter", "sensors/#",
        "--set", "url=http://127.0.0.1:9/ingest", "--set", "headers.Authorization=Bearer s3cret",
        "--json", *where,
    )  # fmt: skip
    status = added.json()
    assert status["state"] == "stopped" and status["headers"] == {"Authorization": "***"}
    assert "next start" in added.stderr and "broker not running" in added.stderr
    assert stored(data_dir)["hook"].table["headers"] == {"Authorization": "Bearer s3cret"}

    spec_json = tmp_path / "spec.json"
    spec_json.write_text(
        json.dumps({"name": "pg", "type": "postgres", "filters": ["a/#"],
                    "url": "postgresql://u:pw@127.0.0.1:9/db", "table": "rows"})
    )  # fmt: skip
    assert run_cli("integration", "add", "--from-file", str(spec_json), *where).code == 0
    spec_toml = tmp_path / "spec.toml"
    spec_toml.write_text(
        '[[integration]]\nname = "k"\ntype = "kafka"\nfilters = ["b/#"]\n'
        'bootstrap_servers = "127.0.0.1:9"\ntopic = "iot.{tenant}"\n'
    )
    assert run_cli("integration", "add", "--from-file", str(spec_toml), *where).code == 0

    listed = run_cli("integration", "ls", "--json", *where).json()
    assert [item["name"] for item in listed] == ["hook", "k", "pg"]
    for item in listed:
        assert set(item) >= LS_KEYS
        assert item["delivered"] is None  # nothing ran: no counters
    assert "pw" not in json.dumps(listed)

    paused = run_cli("integration", "pause", "k", "--json", *where).json()
    assert paused["state"] == "paused"
    assert stored(data_dir)["k"].paused is True

    assert run_cli("integration", "rm", "pg", *where).code == 0
    assert set(stored(data_dir)) == {"hook", "k"}
    assert "no integration named 'pg'" in run_cli("integration", "rm", "pg", *where).error(1)

    bad = run_cli("integration", "add", "x", "--type", "http", "--filter", "a/#",
                  "--set", "url=nope", *where)  # fmt: skip
    assert "integration.url" in bad.error(2)
    unreadable = run_cli("integration", "add", "--from-file", str(tmp_path / "none.json"), *where)
    assert "--from-file" in unreadable.error(2)
