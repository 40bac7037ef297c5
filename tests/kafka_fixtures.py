"""Pytest fixtures for a real Kafka (tests/kafka_service.py starts it).

`kafka`: one node for the whole test session, started on first use (a JVM takes seconds to
start: never one per test) and stopped at the end. Tests share it: each one uses its own
topic prefix (`kafka_prefix`) instead of wiping the node. `kafka_factory`: private nodes for
tests that stop or restart Kafka, stopped at teardown.

Registered once, by `pytest_plugins` in tests/conftest.py.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator

import pytest

from tests.kafka_service import KafkaServer


def _require_java() -> None:
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: run scripts/install-services.sh")


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaServer]:
    """The session's Kafka node (shared: use `kafka_prefix` for your topics)."""
    _require_java()
    server = KafkaServer(tmp_path_factory.mktemp("kafka"))
    try:
        server.start()
        yield server
    finally:
        server.kill()  # its data is thrown away: a clean shutdown would only cost seconds


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
