"""Prometheus exposition of the broker's metrics, read from AdminBackend.metrics() at
scrape time.

Each AdminServer has its own CollectorRegistry (never the process-wide default one: two
brokers in one process, as in tests, must not mix their numbers) holding one collector
that turns a MetricsSnapshot into metric families. Nothing is counted here; the broker
keeps the numbers and the snapshot is taken once per scrape. Integrations are read from
the broker's IntegrationManager (its statuses and latency histograms), when it has one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from mqttq.admin.backend import AdminBackend, HistogramSnapshot, MetricsSnapshot
from mqttq.integrations.worker import LATENCY_BUCKETS_S

if TYPE_CHECKING:
    from mqttq.integrations.manager import IntegrationManager

__all__ = [
    "CONTENT_TYPE",
    "AdminMetrics",
    "BrokerCollector",
    "ProxyCollector",
    "integration_families",
]

CONTENT_TYPE: Final = CONTENT_TYPE_PLAIN_0_0_4
"""The classic text format (version 0.0.4) that every Prometheus scrapes."""

# MetricsSnapshot.counters key -> (metric name, help, is a counter).
_PLAIN: Final = (
    ("connections", "mqttq_connections", "Clients connected now.", False),
    ("connections_total", "mqttq_connections", "MQTT connections accepted.", True),
    ("sessions", "mqttq_sessions", "Sessions, online or not.", False),
    ("sessions_persistent", "mqttq_sessions_persistent", "Persistent sessions.", False),
    ("subscriptions", "mqttq_subscriptions", "Subscriptions of all sessions.", False),
    ("retained", "mqttq_retained_messages", "Retained messages held.", False),
    ("protocol_errors", "mqttq_protocol_errors", "Connections closed for a protocol error.", True),
    ("storage_errors", "mqttq_storage_errors", "Storage operations that failed.", True),
    ("storage_pending", "mqttq_storage_pending", "Storage operations under way.", False),
    ("app_clients", "mqttq_app_clients", "APPLICATION clients consuming their topic.", False),
    ("app_pauses", "mqttq_app_flow_control_pauses", "APPLICATION consumer pauses.", True),
    ("app_skipped", "mqttq_app_messages_skipped", "APPLICATION messages skipped.", True),
    ("app_expired", "mqttq_app_messages_expired", "APPLICATION messages expired.", True),
    ("app_retried", "mqttq_app_messages_retried", "APPLICATION messages re-sent.", True),
    (
        "inbox_held",
        "mqttq_inbox_held",
        "Accepted PUBLISHes held in the publish inbox, not routed yet.",
        False,
    ),
    (
        "inbox_backlog",
        "mqttq_inbox_fanout_backlog",
        "Queue entries routed from the publish inbox, not committed yet.",
        False,
    ),
    (
        "log_produce_failures",
        "mqttq_log_produce_failures",
        "PUBLISHes the Kafka message log did not confirm (publisher refused).",
        True,
    ),
    (
        "log_produce_queued",
        "mqttq_log_produce_queued",
        "Records sent to the message log, not yet confirmed.",
        False,
    ),
    (
        "log_consumer_lag",
        "mqttq_log_consumer_lag",
        "Records of the message log (msg.all) not yet read by this node.",
        False,
    ),
    (
        "log_commit_failures",
        "mqttq_log_commit_failures",
        "Offset commits of the message log consumer that failed (retried).",
        True,
    ),
    (
        "log_undecodable",
        "mqttq_log_undecodable_records",
        "Records of the message log skipped because they could not be decoded.",
        True,
    ),
    ("cluster_clients", "mqttq_cluster_clients", "Clients of the whole cluster known.", False),
    (
        "cluster_downlinked",
        "mqttq_cluster_downlinked",
        "Deliveries sent to other nodes through their downlink topics.",
        True,
    ),
    (
        "cluster_downlink_received",
        "mqttq_cluster_downlink_received",
        "Deliveries other nodes sent to this one.",
        True,
    ),
)
# Per-QoS counters: key prefix (qos0..qos2 appended) -> (metric name, help).
_PER_QOS: Final = (
    ("messages_in_qos", "mqttq_messages_received", "PUBLISH messages received from clients."),
    ("messages_out_qos", "mqttq_messages_sent", "PUBLISH messages sent to clients."),
    ("messages_dropped_qos", "mqttq_messages_dropped", "Messages dropped (full queue, expiry)."),
)
_USAGE: Final = (
    ("connections", "mqttq_tenant_connections", "Connections of the tenant on this node."),
    ("sessions", "mqttq_tenant_sessions", "Sessions of the tenant on this node."),
    ("topics", "mqttq_tenant_topics", "Topics the tenant holds on this node."),
)


class BrokerCollector:
    """Yields the broker's metric families from one `backend.metrics()` call, the admin
    API's own refusals per route read from `refused()`, and each integration's counters
    and delivery latency from `integrations` (when given)."""

    def __init__(
        self,
        backend: AdminBackend,
        refused: Callable[[], Mapping[str, int]],
        integrations: IntegrationManager | None = None,
    ) -> None:
        self.backend = backend
        self.refused = refused
        self.integrations = integrations

    def collect(self) -> Iterator[Metric]:
        """Every family, read now (missing snapshot keys are left out, unknown ignored)."""
        snapshot = self.backend.metrics()
        yield from _plain(snapshot)
        yield from _per_qos(snapshot)
        yield from _refusals(snapshot)
        yield from _tenants(snapshot)
        if snapshot.listeners:
            yield _listeners(snapshot.listeners)
        if snapshot.storage_latency:
            yield _latency(snapshot.storage_latency)
        if snapshot.app_lag:
            lag = GaugeMetricFamily(
                "mqttq_app_consumer_lag",
                "Records of an APPLICATION client's Kafka topic not consumed yet.",
                labels=["client_id"],
            )
            for client_id, value in sorted(snapshot.app_lag.items()):
                lag.add_metric([client_id], value)
            yield lag
        refused = CounterMetricFamily(
            "mqttq_admin_requests_refused",
            "Admin API requests refused (429) by the per-URI rate limit.",
            labels=["route"],
        )
        for route, count in sorted(self.refused().items()):
            refused.add_metric([route], count)
        yield refused
        if self.integrations is not None:
            manager = self.integrations
            statuses = manager.statuses()
            latency = {status["name"]: manager.latency(status["name"]) for status in statuses}
            yield from integration_families(statuses, latency)


class AdminMetrics:
    """A private registry with one BrokerCollector, and the collectors other parts of the
    broker add (`add_collector`); `render()` is the /metrics body."""

    def __init__(
        self,
        backend: AdminBackend,
        refused: Callable[[], Mapping[str, int]],
        integrations: IntegrationManager | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(backend, refused, integrations))

    def add_collector(self, collector: Collector) -> None:
        """Have /metrics yield `collector.collect()`'s families too, read at each scrape;
        ValueError for a family name some collector already yields."""
        self.registry.register(collector)

    def render(self) -> bytes:
        """The text exposition (format 0.0.4, see CONTENT_TYPE) of every family."""
        return generate_latest(self.registry)


class ProxyCollector:
    """`mqttq_proxy_connections_total{outcome}`: connections through the PROXY protocol
    listeners by outcome, read from `counts()` (Broker.proxy_connections) at scrape time."""

    def __init__(self, counts: Callable[[], Mapping[str, int]]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        """The one family, every outcome (zero included)."""
        family = CounterMetricFamily(
            "mqttq_proxy_connections",
            "Connections through the PROXY protocol listeners, by outcome (accepted, local, "
            "untrusted, malformed, timeouts, blocked).",
            labels=["outcome"],
        )
        for outcome, count in sorted(self.counts().items()):
            family.add_metric([outcome], count)
        yield family


def _plain(snapshot: MetricsSnapshot) -> Iterator[Metric]:
    counters = snapshot.counters
    for key, name, documentation, is_counter in _PLAIN:
        value = counters.get(key)
        if value is None:
            continue
        if is_counter:
            # The exposition appends _total to a counter's name.
            yield CounterMetricFamily(name, documentation, value=value)
        else:
            yield GaugeMetricFamily(name, documentation, value=value)


def _per_qos(snapshot: MetricsSnapshot) -> Iterator[Metric]:
    counters = snapshot.counters
    for prefix, name, documentation in _PER_QOS:
        family = CounterMetricFamily(name, documentation, labels=["qos"])
        found = False
        for qos in range(3):
            value = counters.get(f"{prefix}{qos}")
            if value is not None:
                family.add_metric([str(qos)], value)
                found = True
        if found:
            yield family


def _refusals(snapshot: MetricsSnapshot) -> Iterator[Metric]:
    family = CounterMetricFamily(
        "mqttq_refusals",
        "Operations refused by a limit or by authorization, per tenant and reason.",
        labels=["tenant", "reason"],
    )
    for (tenant, reason), count in sorted(snapshot.refusals.items()):
        family.add_metric([tenant, reason], count)
    yield family


def _tenants(snapshot: MetricsSnapshot) -> Iterator[Metric]:
    for key, name, documentation in _USAGE:
        family = GaugeMetricFamily(name, documentation, labels=["tenant"])
        for tenant, usage in sorted(snapshot.tenants.items()):
            value = usage.get(key)
            if value is not None:
                family.add_metric([tenant], value)
        yield family


def _listeners(connected: Mapping[str, int]) -> Metric:
    family = GaugeMetricFamily(
        "mqttq_listener_connections",
        "Clients connected now, by the listener they came through (tcp, tls, ws, wss).",
        labels=["listener"],
    )
    for name, count in sorted(connected.items()):
        family.add_metric([name], count)
    return family


def _latency(histograms: Mapping[str, HistogramSnapshot]) -> Metric:
    family = HistogramMetricFamily(
        "mqttq_storage_latency_seconds",
        "Time storage operations take, per operation.",
        labels=["op"],
    )
    for operation, histogram in sorted(histograms.items()):
        buckets = [(_bound(bound), float(count)) for bound, count in histogram.buckets]
        if not histogram.buckets or not math.isinf(histogram.buckets[-1][0]):
            # Prometheus requires the +Inf bucket; it holds every observation.
            buckets.append(("+Inf", float(histogram.count)))
        family.add_metric([operation], buckets, sum_value=histogram.total)
    return family


def _bound(bound: float) -> str:
    """A bucket's `le` label as Prometheus writes it."""
    return "+Inf" if math.isinf(bound) else repr(float(bound))


# IntegrationManager.status key -> (metric name, help, is a counter).
_INTEGRATION: Final = (
    ("delivered", "mqttq_integration_delivered", "Deliveries the sink accepted.", True),
    ("failed", "mqttq_integration_failed", "Batches the sink did not take (retried).", True),
    ("retried", "mqttq_integration_retried", "Deliveries sent again after a failure.", True),
    (
        "dead_lettered",
        "mqttq_integration_dead_lettered",
        "Deliveries the sink refused for good, sent to the dead-letter place.",
        True,
    ),
    (
        "dropped",
        "mqttq_integration_dropped",
        "Messages that left the backlog undelivered (expired, or a full backlog).",
        True,
    ),
    ("lag", "mqttq_integration_lag", "Deliveries waiting in the integration's backlog.", False),
)


def integration_families(
    statuses: Sequence[Mapping[str, Any]],
    latency: Mapping[str, tuple[Sequence[int], float] | None],
) -> Iterator[Metric]:
    """The integration families, labelled `integration`: the counters and lag of each
    status, `mqttq_integration_up` (1 while its state is running), and the delivery latency
    histogram (`latency[name]`: per-bucket counts over LATENCY_BUCKETS_S plus one past the
    last bound, and their sum; None for a bridge in, which delivers nothing)."""
    for key, name, documentation, is_counter in _INTEGRATION:
        family: Metric
        if is_counter:
            family = CounterMetricFamily(name, documentation, labels=["integration"])
        else:
            family = GaugeMetricFamily(name, documentation, labels=["integration"])
        for status in statuses:
            family.add_metric([status["name"]], int(status.get(key) or 0))
        yield family
    up = GaugeMetricFamily(
        "mqttq_integration_up",
        "1 while the integration's state is running, else 0 (paused, retrying, failed, ...).",
        labels=["integration"],
    )
    for status in statuses:
        up.add_metric([status["name"]], 1 if status.get("state") == "running" else 0)
    yield up
    histogram = HistogramMetricFamily(
        "mqttq_integration_delivery_latency_seconds",
        "From the broker accepting a message to its sink accepting it, per integration.",
        labels=["integration"],
    )
    for name, observed in sorted(latency.items()):
        if observed is None:
            continue
        counts, total = observed
        buckets: list[tuple[str, float]] = []
        cumulative = 0
        for bound, count in zip(LATENCY_BUCKETS_S, counts, strict=False):
            cumulative += count
            buckets.append((_bound(bound), float(cumulative)))
        buckets.append(("+Inf", float(sum(counts))))
        histogram.add_metric([name], buckets, sum_value=total)
    yield histogram
