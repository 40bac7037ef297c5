"""Redis Lua scripts, one `.lua` file each, loaded by name.

Each file starts with a comment stating its KEYS, ARGV and result. The scripts implement
the DEVICE offline queue in TBMQ 2.x's Redis layout (ARCHITECTURE.md section 3); every key
a script touches carries the client's hash tag, so one call touches one cluster slot.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Final

SAVE: Final = "save"
FETCH: Final = "fetch"
REMOVE: Final = "remove"
MARK_PUBREL: Final = "mark_pubrel"
CLEAR: Final = "clear"
TRIM: Final = "trim"
SESSION_INFO: Final = "session_info"
SESSION_NODE: Final = "session_node"

NAMES: Final = (SAVE, FETCH, REMOVE, MARK_PUBREL, CLEAR, TRIM, SESSION_INFO, SESSION_NODE)


@cache
def load_script(name: str) -> str:
    """The source of `mqttq/lua/<name>.lua`; FileNotFoundError for an unknown name."""
    if name not in NAMES:
        raise FileNotFoundError(f"no Lua script named {name!r}; known: {', '.join(NAMES)}")
    return resources.files(__package__).joinpath(f"{name}.lua").read_text(encoding="utf-8")
