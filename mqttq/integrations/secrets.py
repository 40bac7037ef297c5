"""Secrets in integration settings: `${NAME}` references expanded from the environment.

Any string setting of a sink may hold `${NAME}` (e.g. `Authorization = "Bearer ${HOOK_TOKEN}"`).
The settings keep the template as written (that is what is stored and what the admin API
shows); a sink calls `expand_env` when it opens, so the secret itself only lives in the
sink's connection state, never in the settings, a log line or an error message.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Final

from mqttq.errors import ConfigError

ENV_REFERENCE: Final = re.compile(r"\$\{([^}]*)\}")
"""`${NAME}`; NAME must be a shell-style variable name ([A-Za-z_][A-Za-z0-9_]*)."""

_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def expand_env(value: str, where: str, environ: Mapping[str, str] | None = None) -> str:
    """`value` with every `${NAME}` replaced by the environment variable NAME.

    Raises `ConfigError(where, ...)` naming the variable (never its value) when one is unset
    or a reference is not a valid variable name. A `$` not followed by `{` is kept as is.
    `environ` defaults to `os.environ` (read at the call, not at import).
    """
    env = os.environ if environ is None else environ

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if not _ENV_NAME.fullmatch(name):
            raise ConfigError(where, f"'${{{name}}}' is not a valid environment variable reference")
        found = env.get(name)
        if found is None:
            raise ConfigError(where, f"environment variable {name} is not set")
        return found

    return ENV_REFERENCE.sub(substitute, value)


def mentions_env(value: str) -> bool:
    """True when `value` holds at least one `${NAME}` reference."""
    return ENV_REFERENCE.search(value) is not None
