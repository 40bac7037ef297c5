"""The network side: listeners.py (TCP servers), plain_tcp.py (plain TCP without an asyncio
transport per connection, compiled), tls.py and websocket.py."""

from __future__ import annotations
