"""The asyncio shell around the sans-I/O layers: listeners, connections, sessions, delivery.

`mqttq.broker.server.Broker` is the entry point (see its docstring). The modules, by role:

- Network: endpoints.py (the listeners `[listener]` asks for), listeners.py (TCP),
  plain_tcp.py (plain TCP without a transport per connection), tls.py, websocket.py.
- Connections: client.py (the asyncio shell around `protocol.MqttConnection`), dispatch.py
  (what each packet a client sends does), admission.py (who a CONNECT is, and whether it
  may in), timers.py (keep-alive and connect-timeout deadlines).
- Sessions: session.py (per-session queues and in-flight windows), lifecycle.py (CONNECT,
  takeover, DISCONNECT, shutdown), endings.py (expiry, wills, takeovers), will.py,
  restore.py (sessions back from storage at start).
- Delivery: hub.py (routing, delivery, persistence), tenants.py (one tenant's topic space),
  inbox.py (the publish inbox), pending.py (ordered completions, the storage barrier,
  enqueue batching), encoded.py (PUBLISH bytes shared by a fan-out), stats.py and
  latency.py (counters and storage latency histograms).
- Distributed mode: log_router.py (routing what the message log gives back),
  cluster_node.py (this node's side of the cluster), app_log.py, app_session.py and
  app_consumer.py (APPLICATION clients on their Kafka topics).
"""

from __future__ import annotations
