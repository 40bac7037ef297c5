"""The one error type of the migration: what went wrong, as one line for the operator."""

from __future__ import annotations

from mqttq.errors import MqttqError


class MigrateError(MqttqError):
    """PostgreSQL or Redis cannot be used, or the options contradict each other.

    The message is one line that says what failed and where (URLs without passwords);
    the CLI prints it and exits non-zero, without a traceback.
    """


def one_line(exc: BaseException) -> str:
    """`exc`'s message with its line breaks and runs of blanks folded into single spaces
    (libpq's messages span several lines)."""
    return " ".join(str(exc).split()) or type(exc).__name__
