"""The x509 provider end to end: a TLS listener asking for client certificates (a trustme
CA), x509 credentials in the broker's store, real mosquitto clients presenting
certificates whose CN a credential's pattern matches (through `cn_regex`), or not."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from mqttq.auth.model import Credential
from mqttq.auth.providers.x509 import x509_hash
from tests.integration.admin_api import AdminApi, metric_value
from tests.integration.tls_pki import Pki, make_pki
from tests.integration.waiting import DEADLINE, HOST, BrokerFactory

pytestmark = [
    pytest.mark.mqttq_only,
    pytest.mark.skipif(shutil.which("mosquitto_pub") is None, reason="mosquitto-clients needed"),
]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def config(pki: Pki) -> str:
    return f"""
[listener.tls]
port = 0
certfile = "{pki.certfile}"
keyfile = "{pki.keyfile}"
cafile = "{pki.cafile}"
[auth]
anonymous = "never"
providers = ["x509", "credentials"]
[auth.x509]
cn_regex = '^(?P<cn>[a-z]+)-[0-9]+$'
"""


def publish(pki: Pki, port: int, common_name: str, topic: str) -> subprocess.CompletedProcess[str]:
    certfile, keyfile = pki.client(common_name)
    return subprocess.run(
        [
            "mosquitto_pub",
            "-h",
            HOST,
            "-p",
            str(port),
            "-V",
            "mqttv311",
            "--cafile",
            str(pki.cafile),
            "--cert",
            str(certfile),
            "--key",
            str(keyfile),
            "-i",
            f"id-{common_name}",
            "-t",
            topic,
            "-m",
            "x",
            "-q",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE * 3,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_a_certificate_cn_matched_to_an_x509_credential(
    broker_factory: BrokerFactory, pki: Pki
) -> None:
    broker = broker_factory(config=config(pki))
    credential = Credential(
        "x509-sensors", x509_hash("sensor|meter"), tenant="plant", publish_acl=("plant/#",)
    )
    broker.call(broker.broker.auth_store.add_credential(credential))  # type: ignore[union-attr]
    port = broker.broker.ports["tls"]  # type: ignore[union-attr]
    ok = publish(pki, port, "sensor-17", "plant/sensor-17/t")
    assert ok.returncode == 0, ok.stderr
    assert publish(pki, port, "meter-2", "plant/meter-2/t").returncode == 0
    for common_name in ("laptop-1", "sensor"):  # no credential; the regex does not match
        refused = publish(pki, port, common_name, "plant/x")
        assert refused.returncode != 0
        assert "not authorised" in refused.stderr.lower(), refused.stderr
    metrics = AdminApi(broker.data_dir).metrics()
    decisions = {
        outcome: metric_value(
            metrics, "mqttq_auth_decisions_total", provider="x509", outcome=outcome
        )
        for outcome in ("allow", "skip")
    }
    assert decisions == {"allow": 2, "skip": 2}
    api = AdminApi(broker.data_dir)
    api.ok("DELETE", "/api/v1/credentials/x509-sensors")
    gone = publish(pki, port, "sensor-17", "plant/sensor-17/t")  # was cached: forgotten
    assert gone.returncode != 0
    assert "not authorised" in gone.stderr.lower(), gone.stderr


def test_an_x509_credential_never_logs_in_with_a_password(
    broker_factory: BrokerFactory, pki: Pki
) -> None:
    broker = broker_factory(config=config(pki))
    credential = Credential("sensor", x509_hash("sensor"))
    broker.call(broker.broker.auth_store.add_credential(credential))  # type: ignore[union-attr]
    result = subprocess.run(
        [
            "mosquitto_pub",
            "-h",
            HOST,
            "-p",
            str(broker.broker.port),  # type: ignore[union-attr]
            "-V",
            "mqttv311",
            "-u",
            "sensor",
            "-P",
            "x509$sensor",
            "-t",
            "t",
            "-m",
            "x",
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE * 3,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode != 0
    assert "bad user name or password" in result.stderr.lower(), result.stderr
