"""Pytest fixtures for a real Kafka (tests/kafka_service.py starts it).

`kafka`: one node for the whole test session, started on first use (a JVM takes seconds to
start: never one per test) and stopped at the end. Tests share it: each one uses its own
topic prefix (`kafka_prefix`) instead of wiping the node. `kafka_factory`: private nodes for
tests that stop or restart Kafka, stopped at teardown.

Registered once, by `pytest_plugins` in tests/conftest.py.
"""

from __future__ import annotations

import fcntl
import re
import shutil
from collections.abc import Callable, Iterator

import pytest

from tests.kafka_service import KafkaServer


def _require_java() -> None:
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: run scripts/install-services.sh")


SHARED_NODE = "kafka-shared"
"""The folder, under the run's base temporary directory, of the node the xdist workers
share (`pytest_sessionfinish` below kills it when the run ends)."""


@pytest.fixture(scope="session")
def kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaServer]:
    """The session's Kafka node (shared: use `kafka_prefix` for your topics).

    Under pytest-xdist every worker uses the same node: the first to ask starts it, the
    others attach to it (a JVM less per worker, and no idle one burning CPU for the rest
    of the run); the controller kills it at the end of the run."""
    _require_java()
    if not hasattr(request.config, "workerinput"):
        server = KafkaServer(tmp_path_factory.mktemp("kafka"))
        try:
            server.start()
            yield server
        finally:
            server.kill()  # its data is thrown away: a clean shutdown would only cost seconds
        return
    # The workers' base temporary directories are folders of the controller's.
    root = tmp_path_factory.getbasetemp().parent
    with (root / f"{SHARED_NODE}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        server = KafkaServer(root / SHARED_NODE)
        server.start_or_attach()
    yield server


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In the xdist controller, once every worker has ended: kill the node they shared,
    if one of them started it."""
    config = session.config
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    workdir = config._tmp_path_factory.getbasetemp() / SHARED_NODE
    if workdir.exists():
        KafkaServer(workdir).kill()


@pytest.fixture
def kafka_prefix(request: pytest.FixtureRequest) -> str:
    """A topic prefix of this test's own (`t.<test name>.`), so tests sharing `kafka` never
    see each other's topics or consumer groups."""
    name = re.sub(r"[^a-zA-Z0-9]+", "_", request.node.name).strip("_")[-80:]
    return f"t.{name}."


KafkaFactory = Callable[[], KafkaServer]


@pytest.fixture
def kafka_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaFactory]:
    """Started private nodes, for tests that stop or restart Kafka; stopped at teardown."""
    _require_java()
    started: list[KafkaServer] = []

    def make() -> KafkaServer:
        server = KafkaServer(tmp_path_factory.mktemp("kafka-own"))
        started.append(server)
        server.start()
        return server

    try:
        yield make
    finally:
        for server in started:
            server.stop()
