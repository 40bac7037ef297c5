"""`mqttq admin-user add|rm|passwd|ls` as a user runs it (a subprocess): on the embedded
auth.db (while a process holds it open too), on PostgreSQL, and errors in the house style."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqttq.auth.admin_users import AdminUser, AdminUserStore
from mqttq.auth.passwords import verify_password
from mqttq.storage.postgres.admin_users import PostgresAdminUserStore
from mqttq.storage.sqlite.admin_users import SqliteAdminUserStore
from mqttq.storage.sqlite.auth import SqliteAuthStore

CLI_DEADLINE = 60.0
"""Bounds a hung command, not its speed."""


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.code == 0, self
        return json.loads(self.stdout)

    def error(self) -> str:
        assert "Traceback" not in self.stderr, self.stderr
        lines = [line for line in self.stderr.splitlines() if line.startswith("mqttq: error:")]
        assert len(lines) == 1, self.stderr
        return lines[0]


def run_cli(*args: str, password: str | None = None) -> Run:
    """`python -m mqttq ARGS` without the test run's MQTTQ_* variables, stdin not a TTY."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("MQTTQ_")}
    if password is not None:
        env["MQTTQ_ADMIN_PASSWORD"] = password
    done = subprocess.run(
        [sys.executable, "-m", "mqttq", "admin-user", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=CLI_DEADLINE,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def stored(store: AdminUserStore, name: str) -> AdminUser | None:
    async def read() -> AdminUser | None:
        await store.open()
        try:
            return await store.get_admin_user(name)
        finally:
            await store.close()

    return asyncio.run(read())


def test_round_trip_on_sqlite_while_the_file_is_open(tmp_path: Path) -> None:
    common = ("--data-dir", str(tmp_path))

    async def hold_open() -> SqliteAuthStore:
        store = SqliteAuthStore(tmp_path / "auth.db")
        await store.open()
        return store

    # The broker's credential store keeps auth.db open (WAL) while the command writes it.
    runner = asyncio.Runner()
    holder = runner.run(hold_open())
    try:
        added = run_cli("add", "alice", "--role", "admin", "--json", *common, password="pw1")
        assert added.json()["username"] == "alice" and added.json()["role"] == "admin"
        assert "pw1" not in added.stdout + added.stderr
        assert "scrypt" not in added.stdout
        assert run_cli("add", "bob", "--role", "VIEWER", *common, password="pw2").code == 0
        listed = run_cli("ls", "--json", *common).json()["admin_users"]
        assert [(u["username"], u["role"]) for u in listed] == [
            ("alice", "admin"),
            ("bob", "viewer"),
        ]
        assert all(set(u) == {"username", "role", "created_at"} for u in listed)
        table = run_cli("ls", *common)
        assert table.code == 0 and "alice" in table.stdout and "2 admin users" in table.stdout
        assert run_cli("passwd", "alice", *common, password="new pw").code == 0
    finally:
        runner.run(holder.close())
        runner.close()
    alice = stored(SqliteAdminUserStore(tmp_path / "auth.db"), "alice")
    assert alice is not None and verify_password("new pw", alice.password_hash)
    removed = run_cli("rm", "bob", "--json", *common)
    assert removed.json() == {"username": "bob", "removed": True}
    assert stored(SqliteAdminUserStore(tmp_path / "auth.db"), "bob") is None


def test_errors_are_one_line_with_the_exit_code(tmp_path: Path) -> None:
    common = ("--data-dir", str(tmp_path / "data"))
    assert run_cli("add", "alice", "--role", "admin", *common, password="pw").code == 0
    duplicate = run_cli("add", "alice", "--role", "admin", *common, password="pw")
    assert duplicate.code == 1
    assert duplicate.error() == (
        "mqttq: error: admin user 'alice' already exists; "
        "use 'mqttq admin-user passwd' or 'rm' first"
    )
    unknown = run_cli("rm", "nobody", *common)
    assert unknown.code == 1
    assert (
        unknown.error() == "mqttq: error: no admin user 'nobody'; 'mqttq admin-user ls' lists them"
    )
    assert run_cli("passwd", "nobody", *common, password="x").code == 1
    bad_role = run_cli("add", "carol", "--role", "root", *common, password="pw")
    assert bad_role.code == 2 and "--role" in bad_role.error()
    no_password = run_cli("add", "carol", "--role", "admin", *common)
    assert no_password.code == 2
    assert no_password.error() == (
        "mqttq: error: no password: set MQTTQ_ADMIN_PASSWORD or run on a terminal to be asked"
    )
    empty = run_cli("add", "carol", "--role", "admin", *common, password="")
    assert empty.code == 2 and "password is empty" in empty.error()
    bad_name = run_cli("add", " carol", "--role", "admin", *common, password="pw")
    assert bad_name.code == 2 and "NAME ' carol'" in bad_name.error()
    assert stored(SqliteAdminUserStore(tmp_path / "data" / "auth.db"), "carol") is None


def test_reading_commands_create_nothing(tmp_path: Path) -> None:
    data = tmp_path / "nothing"
    listed = run_cli("ls", "--json", "--data-dir", str(data))
    assert listed.json() == {"admin_users": []}
    assert run_cli("rm", "x", "--data-dir", str(data)).code == 1
    assert not data.exists()


def test_round_trip_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(f'[auth]\nstore = "postgres"\n\n[postgres]\nurl = "{postgres_url}"\n')
    common = ("--config", str(config), "--data-dir", str(tmp_path / "data"))
    assert run_cli("add", "pat", "--role", "viewer", *common, password="pg pw").code == 0
    user = stored(PostgresAdminUserStore(postgres_url), "pat")
    assert user is not None and user.role == "viewer"
    assert verify_password("pg pw", user.password_hash)
    assert [u["username"] for u in run_cli("ls", "--json", *common).json()["admin_users"]] == [
        "pat"
    ]
    assert run_cli("rm", "pat", *common).code == 0
    assert stored(PostgresAdminUserStore(postgres_url), "pat") is None
    assert not (tmp_path / "data" / "auth.db").exists()


def test_unreachable_postgres_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as probe:  # bound, never listening: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        config = tmp_path / "broker.toml"
        config.write_text(
            f'[auth]\nstore = "postgres"\n\n[postgres]\nurl = "postgresql://n@127.0.0.1:{port}/x"\n'
        )
        failed = run_cli("ls", "--config", str(config))
    assert failed.code == 1
    assert "postgres" in failed.error().lower()


def test_password_is_asked_twice_without_echo_on_a_terminal(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("MQTTQ_")}
    command = [sys.executable, "-m", "mqttq", "admin-user", "add", "dave", "--role", "admin"]
    pid, terminal = pty.fork()
    if pid == 0:  # the child: the CLI on a terminal (never back into pytest)
        try:
            os.execve(sys.executable, [*command, "--data-dir", str(tmp_path)], env)
        finally:
            os._exit(127)
    seen = b""

    def read_until(marker: bytes | None) -> None:
        nonlocal seen
        deadline = time.monotonic() + CLI_DEADLINE
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

    try:
        read_until(b"password: ")
        os.write(terminal, b"typed secret\n")
        read_until(b"confirmation: ")
        os.write(terminal, b"typed secret\n")
        read_until(None)
    finally:
        reaped, status = os.waitpid(pid, os.WNOHANG)
        if reaped == 0:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        os.close(terminal)
    assert os.waitstatus_to_exitcode(status) == 0, seen
    assert b"admin user 'dave' added" in seen
    assert b"typed secret" not in seen
    user = stored(SqliteAdminUserStore(tmp_path / "auth.db"), "dave")
    assert user is not None and verify_password("typed secret", user.password_hash)
