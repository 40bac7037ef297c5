"""The cluster of the distributed security tests, started once per module: two `mqttq
serve` nodes (node-1, node-2) on the session's Kafka (msg.all), Redis (device queues)
and PostgreSQL (credentials, `[auth] store = "postgres"`), with `$SYS` topics, client
events, and the provider chain jwt (HS256, secret from the environment) -> http (a real
aiohttp service on port 0) -> credentials."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.auth.service import AuthService
from tests.cluster.cluster_helpers import wait_group
from tests.harness import BrokerProcess
from tests.kafka.log_helpers import log_config
from tests.kafka_service import KafkaServer
from tests.postgres_fixtures import PostgresServer
from tests.services import RedisServer

__all__ = ["JWT_SECRET", "JWT_SECRET_ENV", "Cluster", "cluster"]

JWT_SECRET_ENV = "D35_TEST_JWT_SECRET"
JWT_SECRET = "cluster-security-secret-of-32-bytes!"
SYS_INTERVAL = 0.2


@dataclass(frozen=True, slots=True)
class Cluster:
    """The two started nodes, the HTTP auth service they call and their PostgreSQL."""

    one: BrokerProcess
    two: BrokerProcess
    service: AuthService
    postgres_url: str

    @property
    def nodes(self) -> tuple[BrokerProcess, BrokerProcess]:
        return (self.one, self.two)


def node_config(
    bootstrap: str, prefix: str, *, redis_url: str, postgres_url: str, service_url: str, node: str
) -> str:
    extra = f"""
[redis]
url = "{redis_url}"
[cluster]
node_id = "{node}"
[postgres]
url = "{postgres_url}"
[auth]
store = "postgres"
providers = ["jwt", "http", "credentials"]
[auth.jwt]
algorithms = ["HS256"]
secret_env = "{JWT_SECRET_ENV}"
[auth.http]
url = "{service_url}/auth"
timeout = 5.0
[sys]
interval = {SYS_INTERVAL}
[events]
kinds = ["connected", "disconnected"]
"""
    return log_config(bootstrap, prefix, extra, device="redis")


@pytest.fixture(scope="module")
def cluster(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    kafka: KafkaServer,
    redis_server: RedisServer,
    postgres_server: PostgresServer,
) -> Iterator[Cluster]:
    """The module's two nodes (see the module docstring); stopped after its last test,
    their stderr printed when a test of the module failed."""
    redis_server.flush()
    postgres_url = postgres_server.create_database()
    prefix = f"t.cluster_security_{uuid.uuid4().hex[:8]}."
    service = AuthService()
    # Names starting with http- are the service's; every other client is not its own.
    service.answer = lambda body: (
        (200, {"result": "ignore"})
        if not str(body.get("username") or "").startswith("http-")
        else (403, {"error": "refused"})
        if body["username"] == "http-refused"
        else (200, {"result": "allow", "tenant": "default"})
    )
    started: list[BrokerProcess] = []
    with pytest.MonkeyPatch.context() as env:
        env.setenv(JWT_SECRET_ENV, JWT_SECRET)  # the nodes inherit it (tests/harness.py)
        try:
            for node in ("node-1", "node-2"):
                config = node_config(
                    kafka.bootstrap,
                    prefix,
                    redis_url=redis_server.url,
                    postgres_url=postgres_url,
                    service_url=service.url,
                    node=node,
                )
                process = BrokerProcess(tmp_path_factory.mktemp(node), config)
                started.append(process)
                process.start()
            wait_group(kafka.bootstrap, prefix, 2)
            yield Cluster(started[0], started[1], service, postgres_url)
        finally:
            failed = request.session.testsfailed > 0
            for process in started:
                process.stop()
                if failed:
                    print(f"===== node stderr ({process.workdir}) =====\n{process.stderr_text()}")
            service.close()
