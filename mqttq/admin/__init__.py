"""The admin HTTP API of a running broker, and the client the CLI reaches it with.

- The server: `server.py` (`AdminServer`, aiohttp on the broker's event loop: errors, token
  and rate middlewares), `routes.py` with `routes_sessions.py`, `routes_tenants.py` and
  `routes_credentials.py` (the handlers), `validation.py` (every request field checked
  before a handler runs), `openapi.py` (the OpenAPI 3.1 document served at /openapi.json,
  kept in step with the routes by tests), `metrics.py` (Prometheus exposition at /metrics).
- The port and its adapter: `backend.py` (`AdminBackend`, what the API asks of a broker)
  and `broker_backend.py` (`BrokerAdmin`, that port on a running `Broker`).
- Discovery and access: `token.py` (the bearer token and `admin.json`, which says where a
  broker's API listens) and `client.py` (`AdminClient`, the synchronous client behind
  `mqttq tenant` and `mqttq credentials`).
"""

from __future__ import annotations
