"""Admin API handlers for the service routes (/health, /openapi.json, /metrics) and the
node and cluster views (/api/v1/node, /api/v1/cluster, /api/v1/kafka). Routes:
mqttq.admin.api_table."""

from __future__ import annotations

from aiohttp import web

from mqttq.admin.call import Call
from mqttq.admin.metrics import CONTENT_TYPE
from mqttq.admin.shapes import tenant_json
from mqttq.broker.operations_kafka import KafkaStatusError
from mqttq.cluster.status import ClusterStatusError

__all__ = ["cluster", "health", "kafka", "metrics", "node", "openapi"]


async def health(call: Call) -> web.StreamResponse:
    """Liveness (no credentials needed)."""
    return web.json_response(call.backend.health())


async def openapi(call: Call) -> web.StreamResponse:
    """The OpenAPI document."""
    return web.json_response(call.context.document)


async def metrics(call: Call) -> web.StreamResponse:
    """Prometheus text."""
    return web.Response(body=call.context.render_metrics(), headers={"Content-Type": CONTENT_TYPE})


async def cluster(call: Call) -> web.StreamResponse:
    """The cluster's nodes from their heartbeats (503 when Redis cannot be read)."""
    try:
        return web.json_response(await call.backend.cluster_status())
    except ClusterStatusError as exc:
        return web.json_response({"error": str(exc), "field": None}, status=503)


async def kafka(call: Call) -> web.StreamResponse:
    """Kafka topics and consumer groups with their lag (503 when Kafka cannot be read)."""
    try:
        return web.json_response(await call.backend.kafka_status())
    except KafkaStatusError as exc:
        return web.json_response({"error": str(exc), "field": None}, status=503)


async def node(call: Call) -> web.StreamResponse:
    """This node at a glance; its tenants are the stored ones (with their quota) and
    those in use here (on the default quota)."""
    backend = call.backend
    info = backend.node_info()
    in_use = {entry["name"]: entry["usage"] for entry in info.pop("tenants")}
    default = backend.default_tenant_quota()
    stored = {tenant.name: tenant for tenant in await backend.list_tenants()}
    tenants = []
    for name in sorted(stored.keys() | in_use.keys()):
        row = stored.get(name)
        usage = in_use.get(name) or backend.tenant_usage(name)
        quota = row.quota if row is not None else default
        tenants.append(tenant_json(name, quota, row, usage))
    return web.json_response({**info, "tenants": tenants})
