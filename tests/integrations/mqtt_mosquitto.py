"""A real Mosquitto for the bridge tests: Debian's /usr/sbin/mosquitto on 127.0.0.1, on a
free port kept across restarts, persistence on (saved on every change), optionally with a
password file, an ACL file and a second listener with TLS (client certificates required
when asked)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
from pathlib import Path

from tests.integration.waiting import DEADLINE, HOST, wait_for
from tests.services import free_port

MOSQUITTO = Path("/usr/sbin/mosquitto")
MOSQUITTO_PASSWD = Path("/usr/bin/mosquitto_passwd")


class Mosquitto:
    """One mosquitto process; `port` stays the same across `kill()` / `start()`."""

    def __init__(
        self,
        workdir: Path,
        *,
        users: dict[str, str] | None = None,
        tls: tuple[Path, Path, Path] | None = None,
        require_certificate: bool = False,
        acl: str | None = None,
    ) -> None:
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.users = users
        self.tls = tls
        """(cafile, certfile, keyfile) of the listener, or None for plain TCP."""
        self.require_certificate = require_certificate
        self.acl = acl
        """The text of an acl_file (its rules apply to anonymous clients before any `user`)."""
        self.port = 0
        """The plain TCP listener (the tests' own mosquitto_sub / mosquitto_pub use it)."""
        self.tls_port = 0
        self.log = workdir / "mosquitto.log"
        self.process: subprocess.Popen[bytes] | None = None

    def _config(self) -> Path:
        lines = [
            f"listener {self.port} {HOST}",
            "persistence true",
            f"persistence_location {self.workdir}/",
            "autosave_interval 1",
            "autosave_on_changes true",
            "log_dest stderr",
            "log_type all",
        ]
        if os.geteuid() == 0:
            lines.append("user root")
        if self.users is None:
            lines.append("allow_anonymous true")
        else:
            passwords = self.workdir / "passwords"
            passwords.unlink(missing_ok=True)
            for user, password in self.users.items():
                command = [str(MOSQUITTO_PASSWD), "-b", *(["-c"] if not passwords.exists() else [])]
                subprocess.run([*command, str(passwords), user, password], check=True)
            passwords.chmod(0o600)
            lines += ["allow_anonymous false", f"password_file {passwords}"]
        if self.acl is not None:
            acl = self.workdir / "acl"
            acl.write_text(self.acl)
            lines.append(f"acl_file {acl}")
        if self.tls is not None:
            cafile, certfile, keyfile = self.tls
            lines += [f"listener {self.tls_port} {HOST}"]
            lines += [f"cafile {cafile}", f"certfile {certfile}", f"keyfile {keyfile}"]
            if self.require_certificate:
                lines.append("require_certificate true")
        path = self.workdir / "mosquitto.conf"
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self) -> None:
        """Start (or restart on the same port) and wait until it accepts connections."""
        assert self.process is None, "mosquitto already running"
        if not self.port:
            self.port = free_port()
            self.tls_port = free_port() if self.tls is not None else 0
        config = self._config()
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [str(MOSQUITTO), "-c", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        wait_for(self._ready, what=f"mosquitto on port {self.port}")

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"mosquitto exited: {self.log.read_text()}")
        try:
            socket.create_connection((HOST, self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def kill(self) -> None:
        """kill -9: what it saved (autosave on every change) survives."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=DEADLINE)
            self.process = None

    def stop(self) -> None:
        """SIGTERM: mosquitto saves its state and exits."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=DEADLINE)
            self.process = None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


class Subscriber:
    """A running mosquitto_sub (MQTT 5.0) printing `topic payload` and `user properties`,
    one line per message; the lines are collected as they come."""

    def __init__(self, server: Mosquitto, *args: str) -> None:
        command = ["stdbuf", "-oL", "mosquitto_sub", "-h", HOST, "-p", str(server.port)]
        command += ["-V", "mqttv5", "-d", *args]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        wait_for(
            lambda: any("received SUBACK" in line for line in self.lines),
            what=f"mosquitto_sub's SUBACK: {self.lines}",
        )

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def messages(self) -> list[str]:
        """The message lines so far (the `-F` format's lines start with 'MSG|')."""
        return [line[4:] for line in list(self.lines) if line.startswith("MSG|")]

    def wait_messages(self, count: int) -> list[str]:
        return wait_for(
            lambda: (found := self.messages()) and len(found) >= count and found,
            what=f"{count} messages at mosquitto_sub: {self.lines}",
        )

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reader.join()
        if self.process.stdout is not None:
            self.process.stdout.close()


def publish(server: Mosquitto, topic: str, payload: str, *args: str) -> None:
    """mosquitto_pub one message at QoS 1 (MQTT 5.0)."""
    done = subprocess.run(
        [
            *("mosquitto_pub", "-h", HOST, "-p", str(server.port), "-V", "mqttv5", "-q", "1"),
            *("-t", topic, "-m", payload, *args),
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE * 3,
        check=False,
    )
    assert done.returncode == 0, done.stderr
