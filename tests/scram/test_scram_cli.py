"""`mqttq credentials add --scram` and `passwd` as a user runs them (a subprocess): on the
SQLite credential database when no broker runs and through a running broker's admin API;
what they store is checked by the store and by a client that speaks SCRAM."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from mqttq.auth.model import Credential
from mqttq.codec.enums import ProtocolLevel
from mqttq.codec.packets import ConnectPacket
from mqttq.reasons import ReasonCode
from mqttq.storage.sqlite.auth import SqliteAuthStore
from tests.integration.test_cli_tenant import run_cli
from tests.integration.waiting import BrokerFactory
from tests.scram.mqtt5_client import Mqtt5Client
from tests.scram.scram_client import ScramClient

pytestmark = pytest.mark.mqttq_only

NO_ANONYMOUS = '[auth]\nanonymous = "never"\n'


def stored(data_dir: Path, username: str) -> Credential | None:
    async def read() -> Credential | None:
        store = SqliteAuthStore(data_dir / "auth.db")
        await store.open()
        try:
            return await store.get_credential(username)
        finally:
            await store.close()

    return asyncio.run(read())


def scram_connects(port: int, username: str, password: str, mechanism: str) -> int | None:
    client = Mqtt5Client(port)
    try:
        outcome = client.connect_scram("cli", ScramClient(mechanism, username, password))
        if outcome.connack is None:
            return None
        assert outcome.server_verified or outcome.connack.reason_code != 0
        return int(outcome.connack.reason_code)
    finally:
        client.close()


def test_add_scram_on_the_database_stores_secrets_not_the_password(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    added = run_cli(
        "credentials", "add", "alice", "--scram", "--password-stdin", "--json",
        "--data-dir", str(data_dir),
        stdin="pencil\n",
    )  # fmt: skip
    assert added.code == 0, added.stderr
    assert json.loads(added.stdout)["username"] == "alice"
    credential = stored(data_dir, "alice")
    assert credential is not None
    assert credential.scram_mechanisms == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert [s.iterations for s in credential.scram] == [4096, 4096]
    assert all(len(s.salt) == 16 for s in credential.scram)
    raw = (data_dir / "auth.db").read_bytes()
    assert b"pencil" not in raw

    plain = run_cli(
        "credentials", "add", "bob", "--password-stdin", "--json", "--data-dir", str(data_dir),
        stdin="pw\n",
    )  # fmt: skip
    assert plain.code == 0, plain.stderr
    bob = stored(data_dir, "bob")
    assert bob is not None and bob.scram == ()


def test_passwd_renews_the_scram_secrets(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    common = ("--data-dir", str(data_dir))
    assert run_cli("credentials", "add", "alice", "--scram", "--password-stdin", *common,
                   stdin="old-pw\n").code == 0  # fmt: skip
    before = stored(data_dir, "alice")
    assert before is not None
    changed = run_cli("credentials", "passwd", "alice", "--password-stdin", *common,
                      stdin="new-pw\n")  # fmt: skip
    assert changed.code == 0, changed.stderr
    after = stored(data_dir, "alice")
    assert after is not None
    assert after.scram_mechanisms == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert [s.salt for s in after.scram] != [s.salt for s in before.scram]

    assert run_cli("credentials", "add", "carol", "--password-stdin", *common,
                   stdin="pw\n").code == 0  # fmt: skip
    added_later = run_cli("credentials", "passwd", "carol", "--scram", "--password-stdin",
                          *common, stdin="pw2\n")  # fmt: skip
    assert added_later.code == 0, added_later.stderr
    carol = stored(data_dir, "carol")
    assert carol is not None and carol.scram_mechanisms == ["SCRAM-SHA-256", "SCRAM-SHA-512"]


def test_scram_with_x509_is_refused_with_exit_2(tmp_path: Path) -> None:
    refused = run_cli(
        "credentials", "add", "dev", "--scram", "--x509-cn", "dev-.*",
        "--data-dir", str(tmp_path / "data"),
    )  # fmt: skip
    assert refused.code == 2
    assert refused.stderr.splitlines()[-1] == (
        "mqttq: error: --scram: an x509 credential has no password to make them from"
    )


def test_add_scram_through_a_running_broker_then_connect_with_scram(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(config=NO_ANONYMOUS)
    common = ("--data-dir", str(broker.data_dir))
    added = run_cli("credentials", "add", "alice", "--scram", "--password-stdin", "--json",
                    *common, stdin="pencil\n")  # fmt: skip
    assert added.code == 0, added.stderr
    alice = stored(broker.data_dir, "alice")
    assert alice is not None and alice.scram_mechanisms == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        assert scram_connects(broker.port, "alice", "pencil", mechanism) == 0
    assert scram_connects(broker.port, "alice", "wrong", "SCRAM-SHA-256") == (
        ReasonCode.BAD_USER_NAME_OR_PASSWORD
    )
    changed = run_cli("credentials", "passwd", "alice", "--password-stdin", *common,
                      stdin="new-pw\n")  # fmt: skip
    assert changed.code == 0, changed.stderr
    assert scram_connects(broker.port, "alice", "new-pw", "SCRAM-SHA-256") == 0
    assert scram_connects(broker.port, "alice", "pencil", "SCRAM-SHA-256") == (
        ReasonCode.BAD_USER_NAME_OR_PASSWORD
    )
    # The password works in CONNECT's password field too, as for any credential.
    client = Mqtt5Client(broker.port)
    client.send(ConnectPacket("pw", ProtocolLevel.MQTT_5, username="alice", password=b"new-pw"))
    connack = client.read()
    client.close()
    assert connack is not None and getattr(connack, "reason_code", None) == 0
