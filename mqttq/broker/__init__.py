"""The asyncio shell: listeners, client handlers, sessions, the hub and the server.

`mqttq.broker.server.Broker` is the entry point (see its docstring); the modules below it:
client.py (asyncio.Protocol around protocol.MqttConnection), lifecycle.py (CONNECT,
takeover, DISCONNECT, expiry, restore, shutdown), session.py (per-session queues and
in-flight windows), hub.py (routing, delivery, persistence), will.py, pending.py
(ordered completions, storage barrier, enqueue batching), listeners.py, stats.py.
"""

from __future__ import annotations
