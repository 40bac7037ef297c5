"""One connected client: client.py (the asyncio shell around `protocol.MqttConnection`),
link.py (what the packet handlers need of it), dispatch.py (what each packet it sends does),
admission.py (who a CONNECT is, and whether it may in), enhanced.py and enhanced_session.py
(the SCRAM exchanges and what a connection keeps of them), timers.py (keep-alive and
connect-timeout deadlines of every connection)."""

from __future__ import annotations
