"""The admin API's bearer token and its discovery file, both in the broker's data dir.

`admin-token` holds the token when none is configured: created once (mode 0600, owner
only) and reused by every later start, so that `mqttq tenant` and `mqttq credentials` can
read it. `admin.json` says where a running broker's API listens ({"url", "pid"}); it is
written atomically (a reader sees the old file or the new one, never half of one).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import stat
from pathlib import Path
from typing import Any, Final

__all__ = [
    "DISCOVERY_FILE",
    "TOKEN_FILE",
    "load_or_create_token",
    "read_discovery",
    "remove_discovery",
    "write_discovery",
]

log = logging.getLogger("mqttq.admin")

TOKEN_FILE: Final = "admin-token"
DISCOVERY_FILE: Final = "admin.json"
_TOKEN_BYTES: Final = 32


def load_or_create_token(data_dir: Path, configured: str) -> str:
    """The token the API accepts: `configured` when not empty; else the one in
    <data_dir>/admin-token, which is created (0600, `secrets.token_urlsafe(32)`) when it
    does not exist or holds nothing. Two processes starting at once get the same token."""
    if configured:
        return configured
    path = data_dir / TOKEN_FILE
    existing = _read_token(path)
    if existing:
        return existing
    data_dir.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(_TOKEN_BYTES)
    temporary = _write_private(data_dir, f".{TOKEN_FILE}.{os.getpid()}.tmp", token + "\n")
    try:
        if existing is None:
            # link() refuses to replace an existing file: whoever links first wins, and
            # the other process reads the winner's token below.
            try:
                os.link(temporary, path)
            except FileExistsError:
                winner = _read_token(path)
                if winner:
                    return winner
                os.replace(temporary, path)
        else:
            os.replace(temporary, path)  # an empty file: nothing to keep
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
    log.info("admin API token created", extra={"path": str(path)})
    return token


def write_discovery(data_dir: Path, url: str, pid: int) -> None:
    """Write <data_dir>/admin.json = {"url": url, "pid": pid} atomically."""
    data_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"url": url, "pid": pid}) + "\n"
    temporary = _write_private(data_dir, f".{DISCOVERY_FILE}.{os.getpid()}.tmp", text)
    try:
        os.replace(temporary, data_dir / DISCOVERY_FILE)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def read_discovery(data_dir: Path) -> dict[str, Any] | None:
    """The object in <data_dir>/admin.json; None when the file is missing, unreadable,
    not JSON or not a JSON object."""
    try:
        value = json.loads((data_dir / DISCOVERY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def remove_discovery(data_dir: Path) -> None:
    """Remove <data_dir>/admin.json (nothing happens when it is not there)."""
    (data_dir / DISCOVERY_FILE).unlink(missing_ok=True)


def _read_token(path: Path) -> str | None:
    """The stripped token in `path` ("" for an empty file), None when it does not exist.
    A token file others can read is made owner-only: the token grants full control."""
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "admin token file was readable by others; made it owner-only",
            extra={"path": str(path)},
        )
        path.chmod(0o600)
    return text.strip()


def _write_private(directory: Path, name: str, text: str) -> Path:
    """`text` written and synced to directory/name, created with mode 0600."""
    path = directory / name
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(descriptor, 0o600)  # an older file of that name may have another mode
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            descriptor = -1
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    finally:
        if descriptor >= 0:
            os.close(descriptor)
    return path
