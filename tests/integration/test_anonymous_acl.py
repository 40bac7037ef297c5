"""ACL rules with real clients: `[[auth.anonymous_acl]]` (a refused subscription gets 0x80
in a 3.1.1 SUBACK and 0x87 at 5.0; a refused PUBLISH gets PUBACK 0x87 at 5.0 and is
dropped at 3.1.1, acknowledged and never delivered; the first matching rule decides),
and the same rules on a credential (admin API, `mqttq credentials add --rule`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import BrokerFactory, BrokerProcess
from tests.integration.admin_api import AdminApi
from tests.integration.paho_client import PahoClient, PahoClients
from tests.integration.test_cli_tenant import run_cli

pytestmark = pytest.mark.mqttq_only

ACL = """
[auth]
anonymous = "always"
[[auth.anonymous_acl]]
permission = "deny"
action = "subscribe"
topic = "test/nosubscribe"
[[auth.anonymous_acl]]
permission = "deny"
action = "publish"
topic = "secret/#"
[[auth.anonymous_acl]]
permission = "allow"
action = "publish"
topic = "secret/public"
[[auth.anonymous_acl]]
permission = "allow"
action = "all"
topic = "#"
"""


@pytest.fixture
def acl_broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(config=ACL)


@pytest.fixture
def paho_clients() -> Iterator[PahoClients]:
    made = PahoClients()
    yield made
    made.close_all()


def test_refused_subscriptions_get_0x80_at_3_1_1_and_0x87_at_5(
    acl_broker: BrokerProcess, paho_clients: PahoClients
) -> None:
    old = paho_clients.connect(acl_broker.port, "old", protocol=4)
    new = paho_clients.connect(acl_broker.port, "new", protocol=5)
    assert old.subscribe("test/nosubscribe", 1) == [0x80]
    assert new.subscribe("test/nosubscribe", 1) == [0x87]
    # Not covered by the deny rule: the allow-all rule decides.
    assert old.subscribe("test/other", 1) == [1]
    assert new.subscribe("test/+", 1) == [1]


def test_refused_publishes_get_0x87_at_5_and_are_dropped_at_3_1_1(
    acl_broker: BrokerProcess, paho_clients: PahoClients
) -> None:
    listener = paho_clients.connect(acl_broker.port, "listener", protocol=5)
    assert listener.subscribe("#", 1) == [1]
    new = paho_clients.connect(acl_broker.port, "new-pub", protocol=5)
    old = paho_clients.connect(acl_broker.port, "old-pub", protocol=4)
    assert new.publish("secret/plans", b"v5", 1) == 0x87
    assert old.publish("secret/plans", b"v3", 1) == 0  # acknowledged, dropped
    # The first matching rule decides: the deny on secret/# comes before the allow.
    assert new.publish("secret/public", b"first match", 1) == 0x87
    # `secret/#` matches `secret` itself too.
    assert new.publish("secret", b"parent", 1) == 0x87
    # A publish no rule refuses arrives, and only it.
    assert new.publish("news/x", b"allowed", 1) == 0
    assert [m.payload for m in listener.wait_messages(1)] == [b"allowed"]
    assert old.publish("news/y", b"allowed too", 1) == 0
    assert [m.payload for m in listener.wait_messages(2)] == [b"allowed", b"allowed too"]


# --- the same rules on a credential ---------------------------------------------------------

RULES = [
    {"permission": "deny", "action": "subscribe", "topic": "devices/%c/secret"},
    {"permission": "allow", "action": "all", "topic": "devices/%c/#"},
    {"permission": "allow", "action": "subscribe", "topic": "broadcast/#"},
]


def test_credential_rules_decide_with_the_allow_lists(
    broker_factory: BrokerFactory, paho_clients: PahoClients
) -> None:
    broker = broker_factory(config='[auth]\nanonymous = "never"\n')
    api = AdminApi(broker.data_dir)
    shown = api.add_credential("ruled", "pw", acl_rules=RULES)
    assert shown["acl_rules"] == RULES
    status, refused = api.call(
        "POST",
        "/api/v1/credentials",
        {"username": "bad", "password": "pw", "acl_rules": [{"permission": "maybe"}]},
    )
    assert (status, refused["field"]) == (400, "acl_rules")

    device = paho_clients.track(PahoClient(broker.port, "r1", protocol=5))
    device.client.username_pw_set("ruled", "pw")
    device.connect()
    assert device.subscribe("devices/r1/secret", 1) == [0x87]  # the first rule
    assert device.subscribe("devices/r1/#", 1) == [1]
    assert device.subscribe("broadcast/news", 1) == [1]
    assert device.subscribe("devices/r2/#", 1) == [0x87]  # no rule matches: denied
    assert device.publish("broadcast/news", b"x", 1) == 0x87  # subscribe-only rule
    assert device.publish("devices/r1/up", b"mine", 1) == 0
    assert [m.payload for m in device.wait_messages(1)] == [b"mine"]


def test_cli_rule_flags(tmp_path: Path) -> None:
    common = ("--data-dir", str(tmp_path))
    added = run_cli(
        "credentials", "add", "ruled", "--password", "pw",
        "--rule", "deny subscribe devices/%c/secret", "--rule", "allow all devices/%c/#",
        "--rule", "allow subscribe broadcast/#", "--json", *common,
    )  # fmt: skip
    assert added.code == 0, added.stderr
    assert added.json()["acl_rules"] == RULES
    table = run_cli("credentials", "show", "ruled", *common)
    assert "deny subscribe devices/%c/secret" in table.stdout
    for bad, fragment in (
        ("deny subscribe", "PERMISSION ACTION FILTER"),
        ("maybe all #", "permission"),
    ):
        refused = run_cli("credentials", "add", "other", "--password", "pw", "--rule", bad, *common)
        assert refused.code == 2, refused.stderr
        assert fragment in refused.error() and len(refused.stderr.strip().splitlines()) == 1
