"""Deadline-based waiting and what every end-to-end test module shares: the host, the
deadline, the reference-broker mode, and the shape of a broker under test."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

HOST = "127.0.0.1"
DEADLINE = 10.0
"""Generous deadline for anything that should happen 'soon'; never a performance bound."""
MOSQUITTO_MODE = os.environ.get("MQTTQ_TEST_BROKER", "") == "mosquitto"
"""Reference mode: the same tests run against Debian's mosquitto 2.0 to validate them."""

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T],
    *,
    timeout: float = DEADLINE,
    interval: float = 0.02,
    what: str = "condition",
) -> T:
    """Poll `predicate` until it returns a truthy value (returned) or fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class BrokerUnderTest(Protocol):
    """What a test sees of the broker process (implemented by tests/conftest.py)."""

    host: str
    port: int
    data_dir: Path

    def start(self) -> None: ...
    def restart(self) -> None: ...
    def kill9(self) -> None: ...
    def terminate(self) -> int: ...
    def stderr_text(self) -> str: ...


BrokerFactory = Callable[..., BrokerUnderTest]
"""The `broker_factory` fixture: `broker_factory(config="[mqtt]\\n...")` starts a broker."""
