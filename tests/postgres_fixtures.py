"""A real PostgreSQL server for the tests and benchmarks, and its pytest fixtures.

Debian's `postgresql` package (scripts/install-services.sh installs it) keeps its server
binaries off the PATH, under /usr/lib/postgresql/<version>/bin; the newest version there is
used. `initdb` makes a throw-away cluster in a fresh directory under the system temp dir
(pytest's own temp dirs are private to root, and PostgreSQL refuses to run as root: as root,
initdb and postgres run as the `postgres` OS user through `runuser`, on a directory that
user owns). The server listens on 127.0.0.1 only, on a port chosen at run time (retried when
another process takes it first), with its unix socket in its own directory, trust
authentication, and durability off (fsync, full page writes): a test database needs no
crash safety, and it makes the setup fast.

`postgres_server` (session scope) is the server; `postgres_url` gives each test a fresh,
empty database on it. Registered once, by
`pytest_plugins` in tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.services import HOST, PORT_ATTEMPTS, START_DEADLINE, ServiceError, free_port

PG_ROOT = Path("/usr/lib/postgresql")
OS_USER = "postgres"
SUPERUSER = "postgres"


def postgres_bin_dir() -> Path | None:
    """The bin directory of the newest PostgreSQL installed from Debian's packages."""
    if not PG_ROOT.is_dir():
        return None
    found = [
        entry / "bin"
        for entry in PG_ROOT.iterdir()
        if (entry / "bin" / "initdb").exists() and (entry / "bin" / "postgres").exists()
    ]
    if not found:
        return None
    return max(found, key=lambda path: [int(p) for p in path.parent.name.split(".") if p.isdigit()])


def postgres_available() -> bool:
    """True when the server binaries are installed."""
    return postgres_bin_dir() is not None


def _as_server_user() -> list[str]:
    """The command prefix that runs a program as the user owning the cluster."""
    if os.geteuid() != 0:
        return []
    if shutil.which("runuser") is None:
        raise ServiceError("running as root needs runuser (util-linux) to start PostgreSQL")
    return ["runuser", "-u", OS_USER, "--"]


class PostgresServer:
    """One throw-away PostgreSQL cluster; `start()` creates it, `stop()` removes it all."""

    def __init__(self) -> None:
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise ServiceError("PostgreSQL is not installed: run scripts/install-services.sh")
        self.bin_dir = bin_dir
        self.workdir: Path | None = None
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def data_dir(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "data"

    @property
    def socket_dir(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "socket"

    @property
    def log(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "postgres.log"

    def url(self, dbname: str = "postgres") -> str:
        """postgresql://postgres@127.0.0.1:PORT/DBNAME (trust authentication: no password)."""
        return f"postgresql://{SUPERUSER}@{HOST}:{self.port}/{dbname}"

    def start(self) -> None:
        """initdb into a new directory, then start the server on a free port."""
        if self.process is not None:
            raise ServiceError("postgres already running")
        self.workdir = Path(tempfile.mkdtemp(prefix="mqttq-pg-"))
        self.socket_dir.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.workdir, OS_USER, OS_USER)
            shutil.chown(self.socket_dir, OS_USER, OS_USER)
        initdb = [*_as_server_user(), str(self.bin_dir / "initdb"), "-D", str(self.data_dir)]
        initdb += ["-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"]
        done = subprocess.run(
            initdb, capture_output=True, text=True, timeout=60, check=False, cwd=self.workdir
        )
        if done.returncode != 0:
            raise ServiceError(f"initdb failed:\n{done.stdout}{done.stderr}")
        for _attempt in range(PORT_ATTEMPTS):
            if self._spawn(free_port()):
                return
        raise ServiceError(f"postgres found no free port:\n{self.log_text()}")

    def _spawn(self, port: int) -> bool:
        command = [*_as_server_user(), str(self.bin_dir / "postgres"), "-D", str(self.data_dir)]
        command += ["-p", str(port), "-c", f"listen_addresses={HOST}"]
        command += ["-c", f"unix_socket_directories={self.socket_dir}"]
        command += ["-c", "fsync=off", "-c", "full_page_writes=off"]
        command += ["-c", "synchronous_commit=off", "-c", "max_connections=40"]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=self.workdir
            )
        deadline = time.monotonic() + START_DEADLINE
        while not self._accepting(port):
            if self.process.poll() is not None:
                self.process = None
                return False  # most likely the port was taken meanwhile
            if time.monotonic() > deadline:
                self.stop()
                raise ServiceError(f"postgres did not start:\n{self.log_text()}")
            time.sleep(0.05)
        self.port = port
        return True

    def _accepting(self, port: int) -> bool:
        done = subprocess.run(
            [str(self.bin_dir / "pg_isready"), "-q", "-h", HOST, "-p", str(port)],
            capture_output=True,
            timeout=START_DEADLINE,
            check=False,
        )
        return done.returncode == 0

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        """Run `sql` with psql; its output, or ServiceError with psql's message."""
        command = [str(self.bin_dir / "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"]
        command += [self.url(dbname), "-c", sql]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=START_DEADLINE, check=False
        )
        if done.returncode != 0:
            raise ServiceError(f"psql failed: {done.stderr.strip()}")
        return done.stdout.strip()

    def create_database(self) -> str:
        """A new empty database; its URL."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.psql(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        """Fast shutdown (SIGINT), then remove the cluster's directory."""
        process, self.process = self.process, None
        if process is not None:
            # The postmaster itself, not runuser (which does not pass SIGINT on).
            try:
                pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                pid = process.pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)
            try:
                process.wait(timeout=START_DEADLINE)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.workdir is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.workdir)
            self.workdir = None

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except (FileNotFoundError, AssertionError):
            return ""


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL server (use `postgres_url` for a database of one's own)."""
    if not postgres_available():
        pytest.fail("PostgreSQL is not installed: run scripts/install-services.sh")
    server = PostgresServer()
    try:
        server.start()
    except ServiceError:
        server.stop()
        raise
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """postgresql://... of a new, empty database for this test."""
    return postgres_server.create_database()
