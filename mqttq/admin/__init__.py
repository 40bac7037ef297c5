"""The admin HTTP API of a running broker, and the client the CLI reaches it with.

- The route table: `api_table.py` declares every route once (method, path, parameters,
  body schema, answers, handler, role); the server's routes, the OpenAPI document and the
  client's `call` are made from it.
- The server: `server.py` (`AdminServer`, aiohttp on the broker's event loop: errors, rate
  and authorize middlewares; `authorize(request, role)` over a list of authenticators),
  `routes.py` (the table made into aiohttp routes, query checked), `call.py` (what a
  handler is given), the handlers in `routes_node.py`, `routes_sessions.py`,
  `routes_tenants.py`, `routes_credentials.py` and `routes_integrations.py`,
  `validation.py` (request fields checked before a handler changes anything), `openapi.py`
  (the OpenAPI 3.1 document served at /openapi.json: the table's paths, its schemas) and
  `metrics.py` (Prometheus exposition at /metrics).
- The port and its adapter: `backend.py` (`AdminBackend`, what the API asks of a broker)
  and `broker_backend.py` (`BrokerAdmin`, that port over the broker's command and query
  API, mqttq.broker.operations).
- Discovery and access: `token.py` (the bearer token and `admin.json`, which says where a
  broker's API listens) and `client.py` (`AdminClient`, the synchronous client behind
  `mqttq tenant`, `mqttq credentials` and `mqttq integration`).
- The dashboard: `dashboard/` (its own package).
"""

from __future__ import annotations
