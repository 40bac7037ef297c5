"""Interoperability with the Debian mosquitto_pub / mosquitto_sub tools at 3.1, 3.1.1 and 5.0."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator

import pytest

from .helpers import (
    Clients,
)
from .waiting import (
    DEADLINE,
    BrokerUnderTest,
    wait_for,
)

pytestmark = pytest.mark.skipif(
    shutil.which("mosquitto_sub") is None or shutil.which("stdbuf") is None,
    reason="mosquitto-clients (and coreutils stdbuf) needed",
)
VERSIONS = ["mqttv31", "mqttv311", "mqttv5"]


def pub(broker: BrokerUnderTest, version: str, *args: str) -> None:
    result = subprocess.run(
        ["mosquitto_pub", "-h", broker.host, "-p", str(broker.port), "-V", version, *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE * 3,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, result.stderr


class Sub:
    """A running mosquitto_sub; its stdout lines are collected as they come."""

    def __init__(self, broker: BrokerUnderTest, version: str, *args: str) -> None:
        # Line-buffered stdout, so that the debug line for the SUBACK is seen when it happens.
        command = ["stdbuf", "-oL", "mosquitto_sub", "-h", broker.host, "-p", str(broker.port)]
        command += ["-V", version]
        self.process = subprocess.Popen(
            [*command, "-d", "-W", str(int(DEADLINE * 2)), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_subscribed(self) -> None:
        wait_for(
            lambda: any("received SUBACK" in line for line in self.lines),
            what=f"mosquitto_sub's SUBACK: {self.lines}",
        )

    def finish(self) -> list[str]:
        """Wait for exit (it exits after -C messages) and return the message lines."""
        code = self.process.wait(timeout=DEADLINE * 3)
        self._reader.join()
        assert code == 0, self.lines
        return [line[4:] for line in self.lines if line.startswith("MSG|")]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reader.join()
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def subs() -> Iterator[list[Sub]]:
    started: list[Sub] = []
    yield started
    for sub in started:
        sub.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_retained(broker: BrokerUnderTest, subs: list[Sub], version: str) -> None:
    """mosquitto_pub -r sets a retained message; a later mosquitto_sub gets it flagged retained."""
    topic = f"mc/retained/{version}"
    pub(broker, version, "-q", "1", "-r", "-t", topic, "-m", f"kept {version}")
    sub = Sub(broker, version, "-q", "1", "-C", "1", "-t", topic, "-F", "MSG|%r|%q|%t|%p")
    subs.append(sub)
    assert sub.finish() == [f"1|1|{topic}|kept {version}"]


@pytest.mark.parametrize("version", VERSIONS)
def test_qos1_three_messages(broker: BrokerUnderTest, subs: list[Sub], version: str) -> None:
    """mosquitto_sub -C 3 -q 1 gets the three QoS 1 messages of mosquitto_pub, in order."""
    topic = f"mc/qos1/{version}"
    sub = Sub(broker, version, "-q", "1", "-C", "3", "-t", topic, "-F", "MSG|%q|%t|%p")
    subs.append(sub)
    sub.wait_subscribed()
    for i in range(3):
        pub(broker, version, "-q", "1", "-t", topic, "-m", f"m{i}")
    assert sub.finish() == [f"1|{topic}|m{i}" for i in range(3)]


@pytest.mark.parametrize("version", VERSIONS)
def test_qos2_publish_to_other_protocol_subscriber(
    broker: BrokerUnderTest, clients: Clients, version: str
) -> None:
    """mosquitto_pub -q 2 at each version reaches a 5.0 subscriber exactly once at QoS 2."""
    subscriber = clients.connected(broker, "raw5", level=5)
    subscriber.subscribe(("mc/qos2", 2))
    pub(broker, version, "-q", "2", "-t", "mc/qos2", "-m", version)
    [message] = subscriber.receive_messages(1)
    assert (message.payload, message.qos) == (version.encode(), 2)
    subscriber.ping()
    subscriber.expect_silence(0.3)


@pytest.mark.parametrize("version", VERSIONS)
def test_persistent_mosquitto_sub_gets_offline_messages(
    broker: BrokerUnderTest, subs: list[Sub], version: str
) -> None:
    """mosquitto_sub -c (persistent session) gets QoS 1 messages published while it was away."""
    topic = f"mc/offline/{version}"
    session = ["-c", "-i", f"msub{version[5:]}", "-q", "1", "-t", topic]
    if version == "mqttv5":
        session += ["-x", "300"]
    first = Sub(broker, version, *session, "-E")
    subs.append(first)
    assert first.finish() == []
    for i in range(3):
        pub(broker, version, "-q", "1", "-t", topic, "-m", f"o{i}")
    again = Sub(broker, version, *session, "-C", "3", "-F", "MSG|%p")
    subs.append(again)
    assert again.finish() == ["o0", "o1", "o2"]
