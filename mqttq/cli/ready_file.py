"""The ready file of `mqttq serve` and of its `--workers` supervisor: where scripts and
tests learn the process's pid and bound ports."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from mqttq.cli.errors import CliError

__all__ = ["write_ready_file"]


def write_ready_file(
    path: Path, pid: int, mqtt_port: int, ports: Mapping[str, int] | None = None
) -> None:
    """Atomically write `{"pid": pid, "mqtt_port": mqtt_port}` to `path`, with
    `"<name>_port"` for the other listeners in `ports` (tls_port, ws_port, wss_port).

    Readers never see a partial file: the JSON goes to a temporary file in the same
    directory, which then replaces `path`.
    """
    temporary = path.with_name(f".{path.name}.{pid}.tmp")
    try:
        content: dict[str, int] = {"pid": pid, "mqtt_port": mqtt_port}
        content.update({f"{name}_port": port for name, port in (ports or {}).items()})
        content.pop("tcp_port", None)  # that one is mqtt_port
        temporary.write_text(json.dumps(content) + "\n")
        os.replace(temporary, path)
    except OSError as exc:
        # Best effort: the temporary file (or its directory) may not exist at all.
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise CliError(
            f"cannot write the ready file {path}: {exc.strerror}; check --ready-file"
        ) from exc
