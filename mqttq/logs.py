"""Structured logging on stderr: one JSON object per line, or plain text for people.

Modules log with `logging.getLogger(__name__)` and put data in `extra`, not in the message:
`log.info("client connected", extra={"client_id": cid, "protocol_level": 5})`.
The JSON formatter emits `ts`, `level`, `logger`, `msg`, then every `extra` field.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Final, TextIO

from mqttq.config import LOG_FORMATS, LOG_LEVELS

# Attributes every LogRecord has; anything else on a record came from `extra`.
_RECORD_ATTRS: Final = frozenset(
    vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None)).keys()
    | {"message", "asctime", "taskName"}
)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line; non-JSON `extra` values become strings."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRS and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """`<ts> <LEVEL> <logger>: <msg> key=value ...`, for a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        extras = " ".join(
            f"{key}={value!r}" for key, value in record.__dict__.items() if key not in _RECORD_ATTRS
        )
        line = (
            f"{_timestamp(record.created)} {record.levelname:<7} {record.name}: "
            f"{record.getMessage()}"
        )
        if extras:
            line = f"{line} {extras}"
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


class _MqttqHandler(logging.StreamHandler[TextIO]):
    """Marks the handler this module installed, so configuring twice replaces it."""


def configure_logging(level: str, fmt: str) -> None:
    """Send every logger's records at `level` or above to stderr in `fmt` (json | text).

    Replaces the handler a previous call installed; leaves other handlers alone. Raises
    ValueError for a level or format that `mqttq.config` would not accept.
    """
    if level.lower() not in LOG_LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    if fmt.lower() not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {fmt!r}")
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _MqttqHandler):
            root.removeHandler(handler)
            handler.close()
    handler = _MqttqHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt.lower() == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())


def _timestamp(created: float) -> str:
    """RFC 3339 UTC with milliseconds: 2024-05-01T12:00:00.123Z."""
    seconds = int(created)
    millis = int((created - seconds) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"
