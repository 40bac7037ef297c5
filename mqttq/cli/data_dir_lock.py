"""The lock that keeps two brokers off one data dir.

`mqttq serve` holds an exclusive `flock` on `<data_dir>/mqttq.lock` for as long as it runs;
the file holds the holder's pid, for the message a second broker prints. The kernel drops
the lock when the process ends however it ends (kill -9 included), so a stale lock cannot
exist: the file may outlive its holder, the lock never does. Commands that only read the
data dir (`mqttq credentials ls`, `mqttq tenant ls`, ...) never take it, nor test it (a
test would be a lock for a moment, enough to refuse a broker starting then).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Final

from mqttq.cli.errors import EXIT_FAILURE, CliError

__all__ = ["LOCK_FILE", "DataDirLock", "in_use_error", "lock_data_dir"]

LOCK_FILE: Final = "mqttq.lock"


class DataDirLock:
    """A held lock on a data dir; `release` (or the process ending) lets it go."""

    def __init__(self, path: Path, descriptor: int) -> None:
        self.path = path
        self._descriptor = descriptor

    def release(self) -> None:
        """Let the lock go (the file stays: removing it would race a broker starting).
        Calling it again does nothing."""
        descriptor, self._descriptor = self._descriptor, -1
        if descriptor >= 0:
            os.close(descriptor)  # closing the only descriptor drops the flock

    def __enter__(self) -> DataDirLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def lock_data_dir(data_dir: Path) -> DataDirLock:
    """Create `data_dir` if missing and take its lock, writing this process's pid into it.

    Raises CliError (exit 1) when another process holds it:
    `data dir 'DIR' is in use by another mqttq (pid N); stop it or choose another --data-dir`,
    or when `data_dir` is a file; OSError (with its file name) when the directory or the
    lock file cannot be made.
    """
    if data_dir.exists() and not data_dir.is_dir():
        raise CliError(
            f"data dir '{data_dir}' is not a directory; choose another --data-dir", EXIT_FAILURE
        )
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / LOCK_FILE
    # Not O_TRUNC: the pid of a holder must stay readable until we hold the lock ourselves.
    # Python descriptors are not inherited by child processes (workers, ...).
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise in_use_error(data_dir, _read_pid(path)) from None
    except BaseException:
        os.close(descriptor)
        raise
    try:
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode("ascii"), 0)
    except BaseException:
        os.close(descriptor)
        raise
    return DataDirLock(path, descriptor)


def in_use_error(data_dir: Path, pid: int | None) -> CliError:
    """The one line a second broker on `data_dir` exits 1 with."""
    holder = f" (pid {pid})" if pid else ""
    return CliError(
        f"data dir '{data_dir}' is in use by another mqttq{holder}; "
        "stop it or choose another --data-dir",
        EXIT_FAILURE,
    )


def _read_pid(path: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        pid = int(path.read_text(encoding="ascii").strip())
        if pid > 0:
            return pid
    return None
