"""A real Apache Kafka node for the tests, started by `scripts/kafka-local.sh`.

One KRaft node (broker + controller) on 127.0.0.1, on a port chosen at run time, with its data
in a test directory. The jars come from Maven Central on the first start and are cached outside
the work tree, so later starts take seconds. Nothing here is a pytest fixture: see
tests/kafka_fixtures.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.services import ServiceError

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "kafka-local.sh"
START_DEADLINE = 600.0
"""Bounds a hang (the first start fetches ~43 MB of jars); never a performance bound."""


class KafkaServer:
    """One Kafka node in `workdir`; `bootstrap` stays the same across restarts."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = 0

    @property
    def bootstrap(self) -> str:
        """`127.0.0.1:PORT`, for `bootstrap.servers`."""
        if not self.port:
            raise ServiceError("Kafka has not been started")
        return f"127.0.0.1:{self.port}"

    def _script(self, *args: str) -> str:
        try:
            done = subprocess.run(
                [str(SCRIPT), *args],
                capture_output=True,
                text=True,
                timeout=START_DEADLINE,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise ServiceError(f"kafka-local.sh {' '.join(args)} hung") from exc
        if done.returncode != 0:
            raise ServiceError(f"kafka-local.sh {' '.join(args)} failed:\n{done.stderr}")
        return done.stdout

    def start(self) -> None:
        """Start (first time: format the storage, free port; later: same port and data)."""
        out = self._script("start", str(self.workdir))
        last = out.strip().splitlines()[-1] if out.strip() else ""
        if not last.startswith("bootstrap="):
            raise ServiceError(f"kafka-local.sh start printed no bootstrap line:\n{out}")
        self.port = int(last.rpartition(":")[2])

    def start_or_attach(self) -> None:
        """`start`, unless a node already runs in `workdir` (another process started it
        and waited until it took produces): then only take its port."""
        if self.running():
            self.port = int((self.workdir / "ports").read_text().split()[0])
        else:
            self.start()

    def running(self) -> bool:
        """A live Kafka node runs in `workdir`."""
        try:
            pid = int((self.workdir / "kafka.pid").read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except (FileNotFoundError, ValueError):
            return False
        return b"kafka.Kafka" in cmdline and state != "Z"

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a bound (the script's); no-op when not running."""
        if self.workdir.exists():
            self._script("stop", str(self.workdir))

    def kill(self) -> None:
        """SIGKILL at once (a throwaway node, such as the session's at the end of the run)."""
        if self.workdir.exists():
            self._script("kill", str(self.workdir))

    def restart(self) -> None:
        """Stop, then start on the same port with the same data."""
        self.stop()
        self.start()

    def log_text(self) -> str:
        """The node's log (warnings and errors), for a failing test's report."""
        try:
            return (self.workdir / "kafka.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""
