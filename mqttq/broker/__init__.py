"""The asyncio shell around the sans-I/O layers: listeners, connections, sessions, delivery.

`mqttq.broker.server.Broker` is the entry point (see its docstring); endpoints.py says which
listeners `[listener]` asks for. The sub-packages, by role:

- net/: listeners, plain TCP, TLS, WebSocket.
- connection/: one connected client (the shell around `protocol.MqttConnection`), what
  each packet does, admission, keep-alive timers.
- sessions/: the session and its outbound window, its lifecycle, endings, wills, restore.
- delivery/: the hub (route once, deliver or store, complete), tenant spaces, the publish
  inbox, ordered completions and batching, shared encodings, counters.
- distributed/: the message-log router, this node's side of the cluster, APPLICATION
  clients on their Kafka topics.

A module names what it needs of the code above it (a compiled base class on the
per-message path, a `typing.Protocol` elsewhere), never the class that provides it: the
modules import one another without a cycle, type-only imports included
(tests/unit/test_import_graph.py).
"""

from __future__ import annotations
