"""The asyncio shell: listeners, client handlers, sessions, the hub and the server."""

from __future__ import annotations
