"""One connected client: client.py (the asyncio shell around `protocol.MqttConnection`),
dispatch.py (what each packet it sends does), admission.py (who a CONNECT is, and whether it
may in), timers.py (keep-alive and connect-timeout deadlines of every connection)."""

from __future__ import annotations
