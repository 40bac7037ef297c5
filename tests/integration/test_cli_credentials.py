"""`mqttq credentials add|ls|show|rm|passwd` as a user runs it (a subprocess): straight on
the SQLite or PostgreSQL credential database when no broker runs, and through a running
broker's admin API, checked by clients connecting with the password (issue 5). Also
`mqttq tenant` on PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import pty
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mqttq.auth.model import ClientType, Credential
from mqttq.auth.passwords import verify_password
from mqttq.auth.ports import AuthStore
from mqttq.limits.quota import Quota
from mqttq.storage.postgres.auth import PostgresAuthStore
from mqttq.storage.sqlite.auth import SqliteAuthStore
from tests.integration.admin_api import CREDENTIAL_KEYS, AdminApi
from tests.integration.helpers import Clients
from tests.integration.test_cli_tenant import run_cli
from tests.integration.waiting import DEADLINE, HOST, BrokerFactory
from tests.integration.wire import RC

pytestmark = pytest.mark.mqttq_only


DUPLICATE = "credential 'alice' already exists; use 'mqttq credentials passwd' or 'rm' first"


def read_credential(open_store: Callable[[], AuthStore], username: str) -> Credential | None:
    """The credential as the broker's own store reads it."""

    async def read() -> Credential | None:
        store = open_store()
        await store.open()
        try:
            return await store.get_credential(username)
        finally:
            await store.close()

    return asyncio.run(read())


def round_trip(common: tuple[str, ...], open_store: Callable[[], AuthStore]) -> None:
    """add / ls / show / passwd / rm on the database `common` selects, read back through
    `open_store` (the same checks for SQLite and PostgreSQL)."""
    added = run_cli(
        "credentials", "add", "alice", "--password-stdin", "--tenant", "acme",
        "--client-type", "application", "--client-id-pattern", "sensor-*",
        "--publish-acl", "acme/out/#", "--publish-acl", "acme/+/status",
        "--subscribe-acl", "acme/in/#", "--json", *common,
        stdin="first secret\n",
    )  # fmt: skip
    assert "broker not running: editing" in added.stderr
    shown = added.json()
    assert set(shown) == CREDENTIAL_KEYS  # never a hash or a password
    assert shown["username"] == "alice" and shown["tenant"] == "acme"
    assert shown["client_type"] == "APPLICATION"
    assert shown["client_id_pattern"] == "sensor-*"
    assert shown["publish_acl"] == ["acme/out/#", "acme/+/status"]
    assert shown["subscribe_acl"] == ["acme/in/#"]
    stored = read_credential(open_store, "alice")
    assert stored is not None and stored.client_type is ClientType.APPLICATION
    assert stored.publish_acl == ("acme/out/#", "acme/+/status")
    assert "first secret" not in stored.password_hash
    assert verify_password("first secret", stored.password_hash)
    assert not verify_password("first secret\n", stored.password_hash)

    defaults = run_cli("credentials", "add", "bob", "--password", "pw", "--json", *common).json()
    assert (defaults["tenant"], defaults["client_type"]) == ("default", "DEVICE")
    assert (defaults["publish_acl"], defaults["subscribe_acl"]) == (["#"], ["#"])
    assert defaults["client_id_pattern"] is None

    listed = run_cli("credentials", "ls", "--json", *common).json()["credentials"]
    assert [c["username"] for c in listed] == ["alice", "bob"]
    only = run_cli("credentials", "ls", "--tenant", "acme", "--json", *common).json()
    assert [c["username"] for c in only["credentials"]] == ["alice"]
    assert run_cli("credentials", "show", "alice", "--json", *common).json() == shown
    table = run_cli("credentials", "ls", *common)
    assert table.code == 0 and "alice" in table.stdout and "acme/out/#" in table.stdout
    assert stored.password_hash not in table.stdout + table.stderr

    duplicate = run_cli("credentials", "add", "alice", "--password", "x", *common)
    assert duplicate.code == 1 and duplicate.error().endswith(DUPLICATE)
    assert read_credential(open_store, "alice") == stored

    changed = run_cli("credentials", "passwd", "alice", "--password", "second", *common)
    assert changed.code == 0 and "password of 'alice' changed" in changed.stdout
    after = read_credential(open_store, "alice")
    assert after is not None and verify_password("second", after.password_hash)
    assert not verify_password("first secret", after.password_hash)
    assert after.publish_acl == stored.publish_acl and after.tenant == "acme"

    removed = run_cli("credentials", "rm", "alice", "--json", *common)
    assert removed.json() == {"username": "alice", "removed": True}
    assert read_credential(open_store, "alice") is None
    for command in (("show", "alice"), ("rm", "alice"), ("passwd", "alice", "--password", "p")):
        unknown = run_cli("credentials", *command, *common)
        assert unknown.code == 1 and "no credential 'alice'" in unknown.error(), command


# --- no broker: SQLite -------------------------------------------------------------------


def test_round_trip_on_sqlite(tmp_path: Path) -> None:
    round_trip(("--data-dir", str(tmp_path)), lambda: SqliteAuthStore(tmp_path / "auth.db"))


def test_bad_input_is_refused_before_anything_is_stored(tmp_path: Path) -> None:
    common = ("--data-dir", str(tmp_path))
    cases = [
        (("--publish-acl", "a/#/b"), "--publish-acl"),
        (("--subscribe-acl", "a+/b"), "--subscribe-acl"),
        (("--tenant", "two words"), "tenant"),
        (("--client-id-pattern", ""), "--client-id-pattern"),
    ]
    for extra, named in cases:
        refused = run_cli("credentials", "add", "carol", "--password", "pw", *extra, *common)
        assert refused.code == 2, (extra, refused)
        assert named in refused.error(), (extra, refused.stderr)
    # No password on a non-terminal stdin, an empty one, or two sources at once.
    no_password = run_cli("credentials", "add", "carol", *common)
    assert no_password.code == 2 and "--password-stdin" in no_password.error()
    empty = run_cli("credentials", "add", "carol", "--password-stdin", *common, stdin="\n")
    assert empty.code == 2 and "empty" in empty.error()
    both = run_cli("credentials", "add", "carol", "--password", "a", "--password-stdin", *common)
    assert both.code == 2 and "not both" in both.error()
    bad_type = run_cli("credentials", "add", "carol", "--password", "pw", "--client-type", "X")
    assert bad_type.code == 2
    assert run_cli("credentials", "ls", "--json", *common).json() == {"credentials": []}


def test_password_is_asked_twice_without_echo_on_a_terminal(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "mqttq", "credentials", "add", "dave"]
    pid, terminal = pty.fork()
    if pid == 0:  # the child: the CLI on a terminal (never back into pytest)
        try:
            os.execv(sys.executable, [*command, "--data-dir", str(tmp_path)])
        finally:
            os._exit(127)
    seen = b""

    def read_until(marker: bytes | None) -> None:
        """Collect the terminal's output until `marker` shows (None: until it closes)."""
        nonlocal seen
        deadline = time.monotonic() + DEADLINE * 3
        while marker is None or marker not in seen:
            assert time.monotonic() < deadline, f"no {marker!r} in {seen!r}"
            if select.select([terminal], [], [], 0.1)[0]:
                try:
                    chunk = os.read(terminal, 4096)
                except OSError:  # EIO: the child closed the terminal
                    chunk = b""
                if not chunk:
                    assert marker is None, f"the command ended before {marker!r}: {seen!r}"
                    return
                seen += chunk

    # click prints the prompt's text, then getpass turns echo off and prints the final
    # space: typing before that space would be echoed.
    try:
        read_until(b"password: ")
        os.write(terminal, b"typed secret\n")
        read_until(b"confirmation: ")
        os.write(terminal, b"typed secret\n")
        read_until(None)
    finally:
        reaped, status = os.waitpid(pid, os.WNOHANG)
        if reaped == 0:  # still running (a failed read above): stop it, then reap it
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        os.close(terminal)
    assert os.waitstatus_to_exitcode(status) == 0, seen
    assert b"credential 'dave'" in seen
    assert b"typed secret" not in seen  # hidden input: never echoed
    stored = read_credential(lambda: SqliteAuthStore(tmp_path / "auth.db"), "dave")
    assert stored is not None and verify_password("typed secret", stored.password_hash)


# --- no broker: PostgreSQL ---------------------------------------------------------------


def _postgres_config(tmp_path: Path, url: str) -> tuple[str, ...]:
    config = tmp_path / "broker.toml"
    config.write_text(f'[auth]\nstore = "postgres"\n\n[postgres]\nurl = "{url}"\n')
    return ("--config", str(config), "--data-dir", str(tmp_path / "data"))


def test_round_trip_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    common = _postgres_config(tmp_path, postgres_url)
    round_trip(common, lambda: PostgresAuthStore(postgres_url))
    assert not (tmp_path / "data" / "auth.db").exists()


def test_tenant_quota_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    common = _postgres_config(tmp_path, postgres_url)
    changed = run_cli("tenant", "set", "acme", "--max-topics", "12", "--json", *common)
    assert "broker not running: editing PostgreSQL at" in changed.stderr
    assert changed.json()["quota"] == {**Quota().to_dict(), "max_topics": 12}

    async def read() -> Quota | None:
        store = PostgresAuthStore(postgres_url)
        await store.open()
        try:
            tenant = await store.get_tenant("acme")
        finally:
            await store.close()
        return None if tenant is None else tenant.quota

    assert asyncio.run(read()) == Quota(max_topics=12)
    listed = run_cli("tenant", "ls", "--json", *common).json()
    assert [t["name"] for t in listed["tenants"]] == ["acme"]
    assert run_cli("tenant", "rm", "acme", *common).code == 0
    assert asyncio.run(read()) is None


def test_unreachable_postgres_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port = probe.getsockname()[1]
    common = _postgres_config(tmp_path, f"postgresql://nobody@{HOST}:{port}/none")
    for command in (("credentials", "ls"), ("tenant", "set", "a", "--max-topics", "1")):
        failed = run_cli(*command, *common)
        assert failed.code == 1, failed
        assert "postgres" in failed.error().lower()


# --- a running broker: the admin API ------------------------------------------------------


def test_credentials_through_the_running_broker(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(config='[admin]\nport = 0\n\n[auth]\nanonymous = "never"\n')
    common = ("--data-dir", str(broker.data_dir))
    api = AdminApi(broker.data_dir)

    added = run_cli(
        "credentials", "add", "alice", "--password-stdin", "--publish-acl", "alice/#",
        "--json", *common, stdin="s3cret\n",
    )  # fmt: skip
    assert f"via admin API at {api.url}" in added.stderr
    assert added.json()["publish_acl"] == ["alice/#"]
    assert api.ok("GET", "/api/v1/credentials/alice")["publish_acl"] == ["alice/#"]
    ok = clients.raw(broker).connect("c1", username="alice", password=b"s3cret")
    assert ok.reason_code == 0

    duplicate = run_cli("credentials", "add", "alice", "--password", "x", *common)
    assert duplicate.code == 1 and duplicate.error().endswith(DUPLICATE)
    listed = run_cli("credentials", "ls", "--json", *common).json()
    assert [c["username"] for c in listed["credentials"]] == ["alice"]

    assert run_cli("credentials", "passwd", "alice", "--password", "n3w", *common).code == 0
    old = clients.raw(broker)
    refused = old.connect("c2", username="alice", password=b"s3cret", expect_success=False)
    assert refused.reason_code == RC.BAD_USER_NAME_OR_PASSWORD
    new = clients.raw(broker).connect("c3", username="alice", password=b"n3w")
    assert new.reason_code == 0

    assert run_cli("credentials", "rm", "alice", *common).code == 0
    assert api.call("GET", "/api/v1/credentials/alice")[0] == 404
    unknown = run_cli("credentials", "show", "alice", *common)
    assert unknown.code == 1 and "no credential 'alice'" in unknown.error()
