"""Query parameters of the dashboard's routes, checked where the route table declares them
(no HTTP library here: the table, and so the CLI, imports this)."""

from __future__ import annotations

from typing import Final

from mqttq.admin.validation import ApiError

__all__ = ["MAX_SECONDS", "seconds_value"]

MAX_SECONDS: Final = 3600
"""The most history `/api/v1/history` answers (what the sampler keeps)."""


def seconds_value(given: str) -> int:
    """The `seconds` query parameter: a whole number from 1 to MAX_SECONDS (ApiError 400
    naming `seconds` otherwise)."""
    try:
        seconds = int(given)
    except ValueError:
        seconds = 0
    if not 1 <= seconds <= MAX_SECONDS:
        raise ApiError(
            400,
            f"must be a whole number of seconds from 1 to {MAX_SECONDS}, got {given!r}",
            "seconds",
        )
    return seconds
