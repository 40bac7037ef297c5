"""/metrics: the Prometheus text the admin API serves, parsed back with prometheus_client's
own parser and checked sample by sample against the BackendDouble's snapshot."""

from __future__ import annotations

import math

from prometheus_client.parser import text_string_to_metric_families

from mqttq.admin.api_table import ROUTES
from mqttq.admin.backend import HistogramSnapshot, MetricsSnapshot
from mqttq.admin.metrics import AdminMetrics
from mqttq.auth.empty_store import EmptyAuthStore
from tests.admin.backend_double import BackendDouble
from tests.admin.conftest import DoubleApi, RunDouble

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

SNAPSHOT = MetricsSnapshot(
    counters={
        "connections": 3,
        "connections_total": 41,
        "sessions": 5,
        "sessions_persistent": 2,
        "subscriptions": 7,
        "retained": 4,
        "protocol_errors": 1,
        "storage_errors": 0,
        "storage_pending": 6,
        "messages_in_qos0": 10,
        "messages_in_qos1": 11,
        "messages_in_qos2": 12,
        "messages_out_qos0": 20,
        "messages_out_qos1": 21,
        "messages_out_qos2": 22,
        "messages_dropped_qos0": 30,
        "messages_dropped_qos1": 31,
        "messages_dropped_qos2": 32,
        "something_new": 99,
    },
    refusals={("acme", "publish_rate"): 8, ("default", "connections"): 2},
    tenants={
        "acme": {"connections": 2, "sessions": 3, "topics": 9},
        "default": {"connections": 1, "sessions": 2, "topics": 0},
    },
    storage_latency={
        "enqueue": HistogramSnapshot(
            buckets=[(0.001, 4), (0.01, 9), (math.inf, 10)], total=0.05, count=10
        ),
        "fetch": HistogramSnapshot(buckets=[(0.5, 1)], total=0.25, count=2),
    },
)

EXPECTED = {
    ("mqttq_connections", ()): 3,
    ("mqttq_connections_total", ()): 41,
    ("mqttq_sessions", ()): 5,
    ("mqttq_sessions_persistent", ()): 2,
    ("mqttq_subscriptions", ()): 7,
    ("mqttq_retained_messages", ()): 4,
    ("mqttq_protocol_errors_total", ()): 1,
    ("mqttq_storage_errors_total", ()): 0,
    ("mqttq_storage_pending", ()): 6,
    ("mqttq_messages_received_total", (("qos", "0"),)): 10,
    ("mqttq_messages_received_total", (("qos", "1"),)): 11,
    ("mqttq_messages_received_total", (("qos", "2"),)): 12,
    ("mqttq_messages_sent_total", (("qos", "0"),)): 20,
    ("mqttq_messages_sent_total", (("qos", "1"),)): 21,
    ("mqttq_messages_sent_total", (("qos", "2"),)): 22,
    ("mqttq_messages_dropped_total", (("qos", "0"),)): 30,
    ("mqttq_messages_dropped_total", (("qos", "1"),)): 31,
    ("mqttq_messages_dropped_total", (("qos", "2"),)): 32,
    ("mqttq_refusals_total", (("reason", "publish_rate"), ("tenant", "acme"))): 8,
    ("mqttq_refusals_total", (("reason", "connections"), ("tenant", "default"))): 2,
    ("mqttq_tenant_connections", (("tenant", "acme"),)): 2,
    ("mqttq_tenant_sessions", (("tenant", "acme"),)): 3,
    ("mqttq_tenant_topics", (("tenant", "acme"),)): 9,
    ("mqttq_tenant_connections", (("tenant", "default"),)): 1,
    ("mqttq_tenant_sessions", (("tenant", "default"),)): 2,
    ("mqttq_tenant_topics", (("tenant", "default"),)): 0,
    ("mqttq_storage_latency_seconds_bucket", (("le", "0.001"), ("op", "enqueue"))): 4,
    ("mqttq_storage_latency_seconds_bucket", (("le", "0.01"), ("op", "enqueue"))): 9,
    ("mqttq_storage_latency_seconds_bucket", (("le", "+Inf"), ("op", "enqueue"))): 10,
    ("mqttq_storage_latency_seconds_sum", (("op", "enqueue"),)): 0.05,
    ("mqttq_storage_latency_seconds_count", (("op", "enqueue"),)): 10,
    # A snapshot without the +Inf bucket gets one holding every observation.
    ("mqttq_storage_latency_seconds_bucket", (("le", "0.5"), ("op", "fetch"))): 1,
    ("mqttq_storage_latency_seconds_bucket", (("le", "+Inf"), ("op", "fetch"))): 2,
    ("mqttq_storage_latency_seconds_sum", (("op", "fetch"),)): 0.25,
    ("mqttq_storage_latency_seconds_count", (("op", "fetch"),)): 2,
}


def samples(text: str) -> tuple[Samples, set[tuple[str, str]]]:
    """Every sample by (name, labels), and the (name, type) of every family (the parser
    names a counter family without `_total`, so `mqttq_connections` is two families)."""
    found: Samples = {}
    types: set[tuple[str, str]] = set()
    for family in text_string_to_metric_families(text):
        types.add((family.name, family.type))
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            assert key not in found, f"duplicate sample {key}"
            found[key] = sample.value
    return found, types


def expected(table: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> Samples:
    return {(name, frozenset(labels)): value for (name, labels), value in table.items()}


def test_metrics_over_http_match_the_snapshot_exactly(admin_double: RunDouble) -> None:
    async def scenario(api: DoubleApi) -> None:
        api.backend.snapshot = SNAPSHOT
        answer = await api.get("/metrics")
        assert answer.status == 200
        assert answer.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        found, types = samples(answer.body)
        broker = {
            key: value
            for key, value in found.items()
            if key[0] != "mqttq_admin_requests_refused_total"
        }
        assert broker == expected(EXPECTED)
        assert {
            ("mqttq_connections", "gauge"),
            ("mqttq_connections", "counter"),
            ("mqttq_storage_latency_seconds", "histogram"),
            ("mqttq_refusals", "counter"),
            ("mqttq_messages_received", "counter"),
            ("mqttq_tenant_topics", "gauge"),
            ("mqttq_admin_requests_refused", "counter"),
        } <= types
        assert "# TYPE mqttq_connections_total counter" in answer.body
        assert "something_new" not in answer.body
        # The admin API's own refusals: one sample per route, none refused yet.
        admin_routes = {
            dict(labels)["route"]: value
            for (name, labels), value in found.items()
            if name == "mqttq_admin_requests_refused_total"
        }
        assert admin_routes["/api/v1/sessions/{client_id}"] == 0
        assert admin_routes["/metrics"] == 0
        assert set(admin_routes.values()) == {0}
        # One per route pattern of the table.
        assert len(admin_routes) == len({route.path for route in ROUTES})

    admin_double(scenario)


def test_missing_counters_are_left_out() -> None:
    backend = BackendDouble(EmptyAuthStore())
    backend.snapshot = MetricsSnapshot(
        counters={"connections": 1, "messages_in_qos1": 5}, refusals={}, tenants={}
    )
    found, _types = samples(AdminMetrics(backend, dict).render().decode())
    assert found == expected(
        {
            ("mqttq_connections", ()): 1,
            ("mqttq_messages_received_total", (("qos", "1"),)): 5,
        }
    )


def test_refusal_counts_are_read_at_each_scrape() -> None:
    backend = BackendDouble(EmptyAuthStore())
    backend.snapshot = MetricsSnapshot(counters={}, refusals={}, tenants={})
    refused = {"/api/v1/tenants": 0}
    metrics = AdminMetrics(backend, lambda: refused)
    first, _ = samples(metrics.render().decode())
    refused["/api/v1/tenants"] = 4
    backend.snapshot = MetricsSnapshot(counters={"sessions": 9}, refusals={}, tenants={})
    second, _ = samples(metrics.render().decode())
    route = frozenset({("route", "/api/v1/tenants")})
    assert first[("mqttq_admin_requests_refused_total", route)] == 0
    assert second[("mqttq_admin_requests_refused_total", route)] == 4
    assert second[("mqttq_sessions", frozenset())] == 9


def test_each_server_has_its_own_registry() -> None:
    one = BackendDouble(EmptyAuthStore())
    two = BackendDouble(EmptyAuthStore())
    one.snapshot = MetricsSnapshot(counters={"connections": 1}, refusals={}, tenants={})
    two.snapshot = MetricsSnapshot(counters={"connections": 2}, refusals={}, tenants={})
    first, _ = samples(AdminMetrics(one, dict).render().decode())
    second, _ = samples(AdminMetrics(two, dict).render().decode())
    assert first[("mqttq_connections", frozenset())] == 1
    assert second[("mqttq_connections", frozenset())] == 2
