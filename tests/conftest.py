"""Suite-wide pytest wiring: the `mqttq_only` and `broker_process` markers and the broker
fixtures (tests/harness.py has the brokers themselves).

`broker` / `broker_factory` run the broker in the test's process on port 0, configured as
`mqttq serve` would be (`InProcessBroker`). A test marked `@pytest.mark.broker_process`
gets the real `mqttq serve` subprocess from them instead (kill -9, signals, exit codes);
`broker_process_factory` always starts subprocesses. MQTTQ_TEST_LOG_LEVEL=debug raises the
brokers' log level. With MQTTQ_TEST_BROKER=mosquitto they start Debian's mosquitto 2.0
instead, so that the end-to-end tests can be validated against a reference broker; tests of
mqttq-specific behaviour carry `@pytest.mark.mqttq_only` and are skipped in that mode.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import BROKER_PROCESS_MARK, MANUAL_CLOCK_MARK, BrokerProcess, InProcessBroker
from tests.integration.helpers import (
    Clients,
)
from tests.integration.waiting import (
    MOSQUITTO_MODE,
    BrokerFactory,
    BrokerUnderTest,
)

__all__ = ["BrokerFactory", "BrokerProcess", "BrokerUnderTest", "InProcessBroker"]

pytest_plugins = ["tests.kafka_fixtures", "tests.postgres_fixtures", "tests.redis_fixtures"]
"""The services' fixtures, registered once: a session-scoped server (Kafka, PostgreSQL,
Redis) then starts once per run, not once per folder that imports it."""

# Every `mqttq serve` the tests start (and the processes they start) serves its admin API
# on a free port, never on the fixed default 18083: brokers run side by side in a test.
os.environ.setdefault("MQTTQ_ADMIN__PORT", "0")
# The tests' JVMs (Spark drivers and executors, Kafka nodes and their tools) live seconds
# to minutes and do little work each: the C1 compiler alone halves the CPU a Spark start
# costs (18 s -> 10 s for local[2], 38 s -> 21 s for local-cluster[2,1,1024]), and C2's
# peak speed is never reached anyway. Every JVM reads it (JAVA_TOOL_OPTIONS); a flag on a
# JVM's own command line still wins. It is about CPU only: no test result depends on it.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")
# Spark's defaults for the tests' runs (parallelism sized for tiny lakes): see the file.
os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).parent / "spark_conf"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mqttq_only: checks mqttq-specific behaviour; skipped when MQTTQ_TEST_BROKER=mosquitto",
    )
    config.addinivalue_line(
        "markers",
        f"{BROKER_PROCESS_MARK}: the broker fixtures start `mqttq serve` as a subprocess "
        "(the test signals, kills or reads the exit code of the process)",
    )
    config.addinivalue_line(
        "markers",
        f"{MANUAL_CLOCK_MARK}: in-process brokers run on a clock the test moves on "
        "(tests/harness.py let_time_pass); a subprocess or mosquitto still sleeps",
    )
    # pytest-xdist registers it too; without xdist it must still pass --strict-markers.
    config.addinivalue_line("markers", "xdist_group(name): run on the same xdist worker")


PROCESS_DIRS = ("faults", "kafka", "kafka_infra", "cluster", "cluster_ops")
"""Folders whose tests all get `broker_process`: kill -9 and restarts of whole nodes
(faults, cluster failover), and the Kafka-backed brokers, whose time goes to the JVM.
(tests/kafka_app runs its brokers in process; its kill -9 test carries the mark.)"""


XDIST_GROUPS = {
    "kafka": "kafka",
    "kafka_app": "kafka",
    "kafka_infra": "kafka",
    "cluster": "kafka",
    "cluster_security": "kafka",
    "cluster_ops": "kafka",
    "spark": "spark",
}
"""Folders whose tests share a JVM service (the session's Kafka node, the SparkSession):
under `pytest -n 2 --dist loadgroup` each group runs on one worker, so that the JVM
starts once; elsewhere the mark does nothing."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # First: pytest-xdist's own hook reads the `xdist_group` marks to group the tests, and a
    # mark added after it is ignored (the folders' groups would not hold).
    tests_dir = Path(__file__).parent
    process = getattr(pytest.mark, BROKER_PROCESS_MARK)
    for item in items:
        folder = (
            item.path.relative_to(tests_dir).parts[0] if item.path.is_relative_to(tests_dir) else ""
        )
        if folder in PROCESS_DIRS:
            item.add_marker(process)
        if folder in XDIST_GROUPS:
            item.add_marker(pytest.mark.xdist_group(XDIST_GROUPS[folder]))
    if not MOSQUITTO_MODE:
        return
    skip = pytest.mark.skip(reason="mqttq-specific behaviour (MQTTQ_TEST_BROKER=mosquitto)")
    for item in items:
        if item.get_closest_marker("mqttq_only"):
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    # Keep each phase's report on the item so fixtures can tell, at teardown, that the test
    # failed (and then show the broker's log).
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


Broker = BrokerProcess | InProcessBroker


def _factory(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    kind: Callable[[Path, str | None], Broker],
) -> Iterator[Callable[..., Any]]:
    started: list[Broker] = []

    def make(config: str | None = None) -> Broker:
        proc = kind(tmp_path_factory.mktemp("broker"), config)
        started.append(proc)
        proc.start()
        return proc

    yield make
    failed = any(
        getattr(getattr(request.node, f"report_{phase}", None), "failed", False)
        for phase in ("setup", "call")
    )
    died = [proc.workdir for proc in started if proc.ended]
    codes: dict[Path, int | None] = dict.fromkeys(died)
    for proc in started:
        code = proc.stop()
        if proc.workdir in codes:
            codes[proc.workdir] = code
        if failed or proc.workdir in codes:
            print(f"===== broker stderr ({proc.workdir}) =====\n{proc.stderr_text()}")
    if codes:
        pytest.fail(f"the broker died during the test: exit codes {codes}")


@pytest.fixture
def broker_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerFactory]:
    """Start brokers with a custom broker.toml: `broker_factory(config="[mqtt]\\n...")`; in
    this process unless the test is marked `broker_process` (or MQTTQ_TEST_BROKER=mosquitto)."""
    node = request.node
    if MOSQUITTO_MODE or node.get_closest_marker(BROKER_PROCESS_MARK) is not None:
        yield from _factory(request, tmp_path_factory, BrokerProcess)
        return
    manual_clock = node.get_closest_marker(MANUAL_CLOCK_MARK) is not None
    kind = functools.partial(InProcessBroker, manual_clock=manual_clock)
    yield from _factory(request, tmp_path_factory, kind)


@pytest.fixture
def broker_process_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., BrokerProcess]]:
    """Like `broker_factory`, always as `mqttq serve` subprocesses (`BrokerProcess`)."""
    yield from _factory(request, tmp_path_factory, BrokerProcess)


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerUnderTest:
    """The broker with its default configuration."""
    return broker_factory()


@pytest.fixture
def clients(broker_factory: BrokerFactory) -> Iterator[Clients]:
    """Client factory; depends on broker_factory so clients close before brokers stop."""
    registry = Clients()
    yield registry
    registry.close_all()
