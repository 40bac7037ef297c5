"""Redis Lua scripts, one `.lua` file each, loaded by name."""

from __future__ import annotations
