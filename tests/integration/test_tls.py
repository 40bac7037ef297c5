"""MQTT over TLS: mosquitto_pub/sub with --cafile and with client certificates (mTLS),
paho over TLS, a too-old TLS version refused by a real `openssl s_client`, certificates
reloaded on SIGHUP without dropping clients, the listener named in /metrics and in
/api/v1/sessions, and one-line start-up errors naming the bad key."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BrokerFactory, BrokerProcess
from tests.integration.admin_api import AdminApi, metric_value
from tests.integration.paho_client import PahoClient, PahoClients
from tests.integration.tls_pki import Pki, make_pki
from tests.integration.waiting import DEADLINE, HOST, wait_for

pytestmark = [
    pytest.mark.mqttq_only,
    pytest.mark.skipif(
        shutil.which("mosquitto_pub") is None or shutil.which("openssl") is None,
        reason="mosquitto-clients and openssl needed",
    ),
]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def tls_table(pki: Pki, *, cafile: bool = False, identity: bool = False, extra: str = "") -> str:
    lines = [
        "[listener.tls]",
        "port = 0",
        f'certfile = "{pki.certfile}"',
        f'keyfile = "{pki.keyfile}"',
        'min_version = "1.2"',
    ]
    if cafile:
        lines.append(f'cafile = "{pki.cafile}"')
    if identity:
        lines.append("identity_as_username = true")
    return "\n".join(lines) + "\n" + extra


def ports(broker: BrokerProcess) -> dict[str, int]:
    """The listeners' ports from the running broker's ready file."""
    ready = json.loads(broker.ready_file.read_text())
    return {key.removesuffix("_port"): value for key, value in ready.items() if key != "pid"}


def mosquitto(tool: str, port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool, "-h", HOST, "-p", str(port), "-V", "mqttv311", *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE * 3,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def subscriber(port: int, *args: str) -> subprocess.Popen[str]:
    wait = str(int(DEADLINE * 2))
    return subprocess.Popen(
        [
            "mosquitto_sub",
            "-h",
            HOST,
            "-p",
            str(port),
            "-V",
            "mqttv311",
            "-C",
            "1",
            "-W",
            wait,
            *args,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def tls_paho(port: int, client_id: str, cafile: Path, **options: object) -> PahoClient:
    client = PahoClient(port, client_id, **options)  # type: ignore[arg-type]
    client.client.tls_set(ca_certs=str(cafile))
    return client


def test_mosquitto_and_paho_over_tls_beside_tcp_with_the_listener_in_the_admin_api(
    broker_factory: BrokerFactory, pki: Pki
) -> None:
    broker = broker_factory(config=tls_table(pki))
    tls_port = ports(broker)["tls"]
    assert tls_port not in (0, broker.port)
    sub = subscriber(tls_port, "--cafile", str(pki.cafile), "-i", "tls-sub", "-t", "t/tls")
    admin = AdminApi(broker.data_dir)
    try:
        wait_for(
            lambda: [
                s for s in admin.ok("GET", "/api/v1/sessions")["sessions"] if s["listener"] == "tls"
            ],
            what="the mosquitto_sub session over TLS",
        )
        sessions = {s["client_id"]: s for s in admin.ok("GET", "/api/v1/sessions")["sessions"]}
        assert sessions["tls-sub"]["listener"] == "tls"
        text = admin.metrics()
        assert metric_value(text, "mqttq_listener_connections", listener="tls") == 1
        assert metric_value(text, "mqttq_listener_connections", listener="tcp") == 0
        published = mosquitto(
            "mosquitto_pub", tls_port, "--cafile", str(pki.cafile), "-t", "t/tls", "-m", "secret"
        )
        assert published.returncode == 0, published.stderr
        out, err = sub.communicate(timeout=DEADLINE * 3)
        assert (sub.returncode, out) == (0, "secret\n"), err
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.communicate()

    # paho over TLS and a plain TCP client share the broker's routing.
    paho_clients = PahoClients()
    try:
        secure = paho_clients.track(tls_paho(tls_port, "paho-tls", pki.cafile))
        secure.connect()
        assert secure.subscribe("t/mixed", 1) == [1]
        plain = paho_clients.connect(broker.port, "paho-tcp")
        assert plain.publish("t/mixed", b"from tcp", 1) == 0
        assert [m.payload for m in secure.wait_messages(1)] == [b"from tcp"]
        sessions = {s["client_id"]: s for s in admin.ok("GET", "/api/v1/sessions")["sessions"]}
        assert (sessions["paho-tls"]["listener"], sessions["paho-tcp"]["listener"]) == (
            "tls",
            "tcp",
        )
    finally:
        paho_clients.close_all()


def test_a_client_without_the_ca_refuses_the_server(
    broker_factory: BrokerFactory, pki: Pki
) -> None:
    broker = broker_factory(config=tls_table(pki))
    other = make_pki(pki.directory / "other")
    refused = mosquitto(
        "mosquitto_pub", ports(broker)["tls"], "--cafile", str(other.cafile), "-t", "t", "-m", "x"
    )
    assert refused.returncode != 0
    assert "certificate verify failed" in refused.stderr or "TLS" in refused.stderr


def test_mtls_cn_is_the_user_name_and_clients_without_a_certificate_are_refused(
    broker_factory: BrokerFactory, pki: Pki
) -> None:
    # Anonymous clients are refused: only the certificate's CN lets a client in.
    config = tls_table(pki, cafile=True, identity=True) + '[auth]\nanonymous = "never"\n'
    broker = broker_factory(config=config)
    port = ports(broker)["tls"]
    certfile, keyfile = pki.client("sensor-7")
    with_cert = ("--cafile", str(pki.cafile), "--cert", str(certfile), "--key", str(keyfile))
    sub = subscriber(port, *with_cert, "-i", "sensor-7-sub", "-t", "m/#", "-v")
    try:
        admin = AdminApi(broker.data_dir)
        wait_for(
            lambda: any(
                s["client_id"] == "sensor-7-sub"
                for s in admin.ok("GET", "/api/v1/sessions")["sessions"]
            ),
            what="the subscriber with a client certificate",
        )
        published = mosquitto("mosquitto_pub", port, *with_cert, "-t", "m/1", "-m", "signed")
        assert published.returncode == 0, published.stderr
        out, err = sub.communicate(timeout=DEADLINE * 3)
        assert (sub.returncode, out) == (0, "m/1 signed\n"), err
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.communicate()

    # No certificate: the handshake fails (the CA is set, so a certificate is required).
    bare = mosquitto("mosquitto_pub", port, "--cafile", str(pki.cafile), "-t", "m/2", "-m", "x")
    assert bare.returncode != 0
    # A certificate from another CA is refused too.
    stranger = make_pki(pki.directory / "stranger").client("intruder")
    forged = mosquitto(
        "mosquitto_pub", port, "--cafile", str(pki.cafile), "--cert", str(stranger[0]),
        "--key", str(stranger[1]), "-t", "m/3", "-m", "x",
    )  # fmt: skip
    assert forged.returncode != 0
    # Plain TCP: anonymous, so refused with CONNACK 5 (not authorized).
    plain = mosquitto("mosquitto_pub", broker.port, "-t", "m/4", "-m", "x")
    assert plain.returncode != 0
    assert "not authorised" in plain.stderr.lower() or "refused" in plain.stderr.lower()


def s_client(port: int, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["openssl", "s_client", "-connect", f"{HOST}:{port}", "-brief", *options],
        capture_output=True,
        text=True,
        timeout=DEADLINE * 3,
        input="",
        check=False,
    )


def test_a_tls_1_1_handshake_is_refused_and_1_2_accepted(
    broker_factory: BrokerFactory, pki: Pki
) -> None:
    broker = broker_factory(config=tls_table(pki))
    port = ports(broker)["tls"]
    # SECLEVEL=0 lets this openssl offer TLS 1.1 at all: the refusal must be the server's.
    old = s_client(port, "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0")
    assert old.returncode != 0
    assert "Protocol version" not in old.stderr, old.stderr  # no session was established
    # The server ends the handshake: an alert, or (uvloop) the connection closed at once.
    assert "alert protocol version" in old.stderr or "unexpected eof" in old.stderr, old.stderr
    current = s_client(port, "-tls1_2", "-CAfile", str(pki.cafile))
    assert current.returncode == 0, current.stderr
    assert "Protocol version: TLSv1.2" in current.stderr, current.stderr
    assert "Verification: OK" in current.stderr


def served_common_name(port: int, cafile: Path) -> str:
    context = ssl.create_default_context(cafile=str(cafile))
    with (
        socket.create_connection((HOST, port), timeout=DEADLINE) as raw,
        context.wrap_socket(raw, server_hostname=HOST) as tls,
    ):
        cert = tls.getpeercert()
    assert cert is not None
    return next(value for rdn in cert["subject"] for key, value in rdn if key == "commonName")


@pytest.mark.broker_process
def test_sighup_reloads_certificates_without_dropping_clients(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    pki = make_pki(tmp_path / "pki")  # its own files: this test replaces them
    broker = broker_factory(config=tls_table(pki))
    port = ports(broker)["tls"]
    assert served_common_name(port, pki.cafile) == "mqttq-test-server"
    paho_clients = PahoClients()
    try:
        before = paho_clients.track(tls_paho(port, "before-reload", pki.cafile))
        before.connect()
        assert before.subscribe("r/#", 1) == [1]

        pki.renew_server("renewed-server")
        assert broker.process is not None
        os.kill(broker.process.pid, signal.SIGHUP)
        wait_for(
            lambda: served_common_name(port, pki.cafile) == "renewed-server",
            what="the renewed certificate on new connections",
        )
        after = paho_clients.track(tls_paho(port, "after-reload", pki.cafile))
        after.connect()
        assert after.publish("r/1", b"still here", 1) == 0
        assert [m.payload for m in before.wait_messages(1)] == [b"still here"]
        assert before.client.is_connected()
    finally:
        paho_clients.close_all()


# --- start-up errors ---------------------------------------------------------------------


def serve_with(tmp_path: Path, config: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "broker.toml"
    path.write_text('[storage]\nbackend = "memory"\n[admin]\nenabled = false\n' + config)
    env = {key: value for key, value in os.environ.items() if not key.startswith("MQTTQ_")}
    return subprocess.run(
        [sys.executable, "-m", "mqttq", "serve", "--port", "0", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_bad_tls_files_are_one_line_errors_naming_the_key(tmp_path: Path, pki: Pki) -> None:
    other = make_pki(tmp_path / "other")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    unreadable = tmp_path / "unreadable.key"
    unreadable.write_bytes(pki.keyfile.read_bytes())
    unreadable.chmod(0)
    cases = [
        (f'certfile = "{garbage}"\nkeyfile = "{pki.keyfile}"', "listener.tls.certfile"),
        (f'certfile = "{pki.certfile}"\nkeyfile = "{other.keyfile}"', "listener.tls.keyfile"),
        (
            f'certfile = "{tmp_path}/missing.pem"\nkeyfile = "{pki.keyfile}"',
            "listener.tls.certfile",
        ),
        (
            f'certfile = "{pki.certfile}"\nkeyfile = "{pki.keyfile}"\ncafile = "{garbage}"',
            "listener.tls.cafile",
        ),
    ]
    if os.geteuid() != 0:  # root reads any file
        cases.append(
            (f'certfile = "{pki.certfile}"\nkeyfile = "{unreadable}"', "listener.tls.keyfile")
        )
    for table, key in cases:
        result = serve_with(tmp_path, f"[listener.tls]\nport = 0\n{table}\n")
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, result.stderr
        assert len(lines) == 1, result.stderr
        assert key in lines[0], lines
        assert "Traceback" not in result.stderr
