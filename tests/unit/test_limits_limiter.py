"""Limits with a fake clock: node first then tenant, nothing consumed on refusal, tenant
isolation, live quota changes, count limits, refusal counters."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest

from mqttq.limits import NO_TENANT, Layer, Limits, Quota, Reason, Refused

BIG = Quota()


def quota(
    *,
    publish: float = 1000.0,
    connect: float = 1000.0,
    connections: int = 1000,
    sessions: int = 1000,
    topics: int = 1000,
) -> Quota:
    return Quota(
        max_connections_per_node=connections,
        max_connection_rate=connect,
        max_topics=topics,
        max_sessions=sessions,
        max_publish_rate=publish,
    )


def limits(
    node: Quota = BIG,
    default: Quota = BIG,
    *,
    rate_wait: float = 1.0,
    tcp_rate: float = 1000.0,
    tenant_quotas: Mapping[str, Quota] | None = None,
) -> Limits:
    return Limits(
        node,
        default,
        rate_wait=rate_wait,
        burst_seconds=1.0,
        tcp_rate=tcp_rate,
        now=0.0,
        tenant_quotas=tenant_quotas,
    )


def publishes(lim: Limits, tenant: str, now: float, n: int) -> list[float | Refused]:
    return [lim.admit_publish(tenant, now) for _ in range(n)]


PUB_TENANT = Refused(Reason.PUBLISH_RATE, Layer.TENANT)
PUB_NODE = Refused(Reason.PUBLISH_RATE, Layer.NODE)


# ---------------------------------------------------------------------- rates


def test_publish_admits_burst_then_waits_then_refuses_at_the_tenant() -> None:
    lim = limits(default=quota(publish=2.0))
    assert publishes(lim, "a", 0.0, 5) == [0.0, 0.0, 0.5, 1.0, PUB_TENANT]


def test_node_layer_is_checked_first() -> None:
    lim = limits(node=quota(publish=0.0), default=quota(publish=0.0))
    assert lim.admit_publish("a", 0.0) == PUB_NODE


def test_node_refusal_consumes_nothing_at_the_tenant() -> None:
    lim = limits(node=quota(publish=0.0), default=quota(publish=1.0), rate_wait=0.0)
    assert publishes(lim, "a", 0.0, 3) == [PUB_NODE] * 3
    lim.set_node_quota(BIG, 0.0)
    # The tenant's single token is still there (the node bucket refills from empty).
    assert publishes(lim, "a", 1.0, 2) == [0.0, PUB_TENANT]


def test_tenant_refusal_refunds_the_node_token() -> None:
    node = quota(publish=1.0)
    lim = limits(node=node, tenant_quotas={"a": quota(publish=0.0)}, rate_wait=0.0)
    assert publishes(lim, "a", 0.0, 3) == [PUB_TENANT] * 3
    # The node bucket holds one token; "a"'s refusals gave theirs back.
    assert publishes(lim, "b", 0.0, 2) == [0.0, PUB_NODE]


def test_tenant_b_is_unaffected_by_tenant_a_exhausting_its_bucket() -> None:
    lim = limits(default=quota(publish=1.0), rate_wait=0.5)
    assert publishes(lim, "a", 0.0, 4) == [0.0, PUB_TENANT, PUB_TENANT, PUB_TENANT]
    assert publishes(lim, "b", 0.0, 2) == [0.0, PUB_TENANT]
    assert lim.admit_publish("a", 1.0) == 0.0


def test_delay_is_the_larger_of_the_two_layers_waits() -> None:
    lim = limits(node=quota(publish=2.0), default=quota(publish=1.0), rate_wait=2.0)
    assert lim.admit_publish("a", 0.0) == 0.0
    # Node: a token left (0.0); tenant: 1.0 s.
    assert lim.admit_publish("a", 0.0) == 1.0
    # Node: 0.5 s; tenant: 2.0 s.
    assert lim.admit_publish("a", 0.0) == 2.0


def test_each_layer_refuses_a_wait_longer_than_rate_wait() -> None:
    lim = limits(node=quota(publish=1.0), default=quota(publish=100.0), rate_wait=0.5)
    assert publishes(lim, "a", 0.0, 2) == [0.0, PUB_NODE]
    assert lim.admit_publish("a", 0.5) == 0.5


def test_connect_uses_the_connection_rate_not_the_publish_rate() -> None:
    lim = limits(default=quota(connect=1.0, publish=1000.0))
    connect_refused = Refused(Reason.CONNECTION_RATE, Layer.TENANT)
    got = [lim.admit_connect("a", 0.0) for _ in range(3)]
    assert got == [0.0, 1.0, connect_refused]
    assert publishes(lim, "a", 0.0, 3) == [0.0, 0.0, 0.0]


def test_connect_node_rate_then_tenant_rate() -> None:
    lim = limits(node=quota(connect=1.0), default=quota(connect=100.0), rate_wait=0.0)
    assert lim.admit_connect("a", 0.0) == 0.0
    assert lim.admit_connect("b", 0.0) == Refused(Reason.CONNECTION_RATE, Layer.NODE)
    assert lim.admit_connect("b", 1.0) == 0.0


def test_tcp_rate_is_node_only_and_counted_under_no_tenant() -> None:
    lim = limits(tcp_rate=2.0)
    got = [lim.admit_tcp(0.0) for _ in range(5)]
    assert got == [0.0, 0.0, 0.5, 1.0, Refused(Reason.TCP_RATE, Layer.NODE)]
    assert lim.refusals == {(NO_TENANT, "tcp_rate"): 1}
    assert lim.tenants() == []
    lim.set_tcp_rate(4.0, 0.0)
    assert lim.tcp_rate == 4.0
    # Two tokens of debt, less the two extra tokens of the larger bucket: empty, so the
    # next waits for one token at 4 tokens/s.
    assert lim.admit_tcp(0.0) == 0.25


def test_rate_zero_refuses_everything_at_its_layer() -> None:
    lim = limits(default=quota(publish=0.0, connect=0.0), rate_wait=100.0)
    assert lim.admit_publish("a", 0.0) == PUB_TENANT
    assert lim.admit_connect("a", 5.0) == Refused(Reason.CONNECTION_RATE, Layer.TENANT)


# ---------------------------------------------------------------------- live changes


def test_raised_tenant_quota_applies_to_an_existing_limiter() -> None:
    lim = limits(default=quota(publish=1.0), rate_wait=1.0)
    assert publishes(lim, "a", 0.0, 3) == [0.0, 1.0, PUB_TENANT]
    lim.set_tenant_quota("a", quota(publish=4.0), 0.0)
    assert lim.quota_of("a").max_publish_rate == 4.0
    # One token of debt, plus the three extra tokens of the larger bucket: two left.
    assert publishes(lim, "a", 0.0, 3) == [0.0, 0.0, 0.25]


def test_lowered_tenant_quota_applies_at_once() -> None:
    lim = limits(default=quota(publish=100.0), rate_wait=1.0)
    assert lim.admit_publish("a", 0.0) == 0.0
    lim.set_tenant_quota("a", quota(publish=1.0), 0.0)
    assert publishes(lim, "a", 0.0, 3) == [0.0, 1.0, PUB_TENANT]


def test_node_quota_change_applies_at_once() -> None:
    lim = limits(node=quota(publish=100.0, connections=5), rate_wait=0.0)
    lim.set_node_quota(quota(publish=1.0, connections=1), 0.0)
    assert lim.node_quota.max_publish_rate == 1.0
    assert publishes(lim, "a", 0.0, 2) == [0.0, PUB_NODE]
    assert lim.acquire_connection("a") is None
    assert lim.acquire_connection("b") == Refused(Reason.CONNECTIONS, Layer.NODE)
    lim.set_node_quota(quota(publish=100.0, connections=2), 0.0)
    assert lim.acquire_connection("b") is None
    # The emptied node bucket gets the 99 extra tokens of its larger size at once.
    assert lim.admit_publish("b", 0.0) == 0.0
    assert lim.admit_publish("b", 0.01) == 0.0


def test_default_quota_applies_to_tenants_without_their_own() -> None:
    own = quota(connections=1)
    lim = limits(default=quota(connections=1), tenant_quotas={"own": own})
    for tenant in ("a", "own"):
        assert lim.acquire_connection(tenant) is None
        assert lim.acquire_connection(tenant) == Refused(Reason.CONNECTIONS, Layer.TENANT)
    lim.set_default_quota(quota(connections=3), 0.0)
    assert lim.default_quota.max_connections_per_node == 3
    assert lim.acquire_connection("a") is None
    assert lim.acquire_connection("own") == Refused(Reason.CONNECTIONS, Layer.TENANT)
    assert lim.quota_of("own") == own
    assert lim.quota_of("new") == quota(connections=3)


def test_set_tenant_quota_none_falls_back_to_the_default() -> None:
    lim = limits(default=quota(topics=1), tenant_quotas={"a": quota(topics=3)})
    assert [lim.acquire_topic("a") for _ in range(3)] == [None, None, None]
    lim.set_tenant_quota("a", None, 0.0)
    assert lim.quota_of("a") == quota(topics=1)
    # Lowered below the count: holders keep theirs, new ones are refused.
    assert lim.usage("a")["topics"] == 3
    assert lim.acquire_topic("a") == Refused(Reason.TOPICS, Layer.TENANT)
    for _ in range(3):
        lim.release_topic("a")
    assert [lim.acquire_topic("a"), lim.acquire_topic("a")] == [
        None,
        Refused(Reason.TOPICS, Layer.TENANT),
    ]


def test_quota_set_before_the_first_request_is_used_when_the_limiter_is_created() -> None:
    lim = limits(default=quota(sessions=5))
    lim.set_tenant_quota("a", quota(sessions=1), 0.0)
    assert lim.tenants() == []
    assert lim.acquire_session("a") is None
    assert lim.acquire_session("a") == Refused(Reason.SESSIONS, Layer.TENANT)


# ---------------------------------------------------------------------- counts

KINDS = ["connections", "sessions", "topics"]
FIELD = {"connections": "max_connections_per_node", "sessions": "max_sessions"}


def acquire(lim: Limits, kind: str, tenant: str) -> Refused | None:
    if kind == "connections":
        return lim.acquire_connection(tenant)
    if kind == "sessions":
        return lim.acquire_session(tenant)
    return lim.acquire_topic(tenant)


def release(lim: Limits, kind: str, tenant: str) -> None:
    if kind == "connections":
        lim.release_connection(tenant)
    elif kind == "sessions":
        lim.release_session(tenant)
    else:
        lim.release_topic(tenant)


def with_count(kind: str, value: int) -> Quota:
    return dataclasses.replace(BIG, **{FIELD.get(kind, "max_topics"): value})


@pytest.mark.parametrize("kind", KINDS)
def test_tenant_count_refuses_exactly_at_the_limit(kind: str) -> None:
    lim = limits(default=with_count(kind, 3))
    assert [acquire(lim, kind, "a") for _ in range(3)] == [None] * 3
    refused = acquire(lim, kind, "a")
    assert refused == Refused(Reason(kind), Layer.TENANT)
    assert lim.usage("a")[kind] == 3
    assert lim.node_usage()[kind] == 3
    release(lim, kind, "a")
    assert lim.usage("a")[kind] == 2
    assert acquire(lim, kind, "a") is None


@pytest.mark.parametrize("kind", KINDS)
def test_node_count_refuses_exactly_at_the_limit(kind: str) -> None:
    lim = limits(node=with_count(kind, 2))
    assert acquire(lim, kind, "a") is None
    assert acquire(lim, kind, "b") is None
    assert acquire(lim, kind, "c") == Refused(Reason(kind), Layer.NODE)
    assert lim.usage("c")[kind] == 0
    release(lim, kind, "a")
    assert acquire(lim, kind, "c") is None
    assert lim.node_usage()[kind] == 2


@pytest.mark.parametrize("kind", KINDS)
def test_tenant_count_refusal_releases_the_node_count(kind: str) -> None:
    lim = limits(node=with_count(kind, 1), tenant_quotas={"a": with_count(kind, 0)})
    assert acquire(lim, kind, "a") == Refused(Reason(kind), Layer.TENANT)
    assert acquire(lim, kind, "a") == Refused(Reason(kind), Layer.TENANT)
    assert lim.node_usage()[kind] == 0
    assert acquire(lim, kind, "b") is None


def test_force_acquire_counts_past_both_layers() -> None:
    lim = limits(node=quota(sessions=1, topics=1), default=quota(sessions=1, topics=1))
    assert lim.acquire_session("a", force=True) is None
    assert lim.acquire_session("a", force=True) is None
    assert lim.acquire_topic("b", force=True) is None
    assert lim.acquire_topic("b", force=True) is None
    assert lim.usage("a")["sessions"] == 2
    assert lim.node_usage() == {"connections": 0, "sessions": 2, "topics": 2}
    assert lim.acquire_session("c") == Refused(Reason.SESSIONS, Layer.NODE)
    lim.release_session("a")
    lim.release_session("a")
    assert lim.acquire_session("a") is None


def test_release_without_a_hold_changes_nothing() -> None:
    lim = limits()
    assert lim.acquire_connection("a") is None
    lim.release_connection("b")
    lim.release_connection("unknown")
    lim.release_session("a")
    assert lim.node_usage() == {"connections": 1, "sessions": 0, "topics": 0}
    assert lim.usage("a") == {"connections": 1, "sessions": 0, "topics": 0}


def test_count_zero_refuses_every_new_acquire() -> None:
    lim = limits(default=quota(connections=0, sessions=0, topics=0))
    assert lim.acquire_connection("a") == Refused(Reason.CONNECTIONS, Layer.TENANT)
    assert lim.acquire_session("a") == Refused(Reason.SESSIONS, Layer.TENANT)
    assert lim.acquire_topic("a") == Refused(Reason.TOPICS, Layer.TENANT)


# ---------------------------------------------------------------------- reading


def test_usage_node_usage_and_tenants() -> None:
    lim = limits()
    assert lim.usage("nobody") == {"connections": 0, "sessions": 0, "topics": 0}
    lim.acquire_connection("b")
    lim.acquire_session("a")
    lim.acquire_topic("a")
    lim.admit_publish("c", 0.0)
    assert lim.tenants() == ["a", "b", "c"]
    assert lim.usage("a") == {"connections": 0, "sessions": 1, "topics": 1}
    assert lim.node_usage() == {"connections": 1, "sessions": 1, "topics": 1}


def test_prune_drops_idle_tenants_and_the_next_request_recreates_them() -> None:
    lim = limits(default=quota(publish=1.0, connections=1), rate_wait=0.0)
    lim.acquire_connection("held")
    assert lim.admit_publish("busy", 0.0) == 0.0
    lim.acquire_topic("idle")
    lim.release_topic("idle")
    assert lim.prune(0.5) == 1
    assert lim.tenants() == ["busy", "held"]
    assert lim.prune(1.0) == 1
    assert lim.tenants() == ["held"]
    assert lim.admit_publish("busy", 1.0) == 0.0
    assert lim.admit_publish("busy", 1.0) == PUB_TENANT
    assert lim.acquire_connection("held") == Refused(Reason.CONNECTIONS, Layer.TENANT)


def test_pruned_tenant_with_own_quota_keeps_it() -> None:
    lim = limits(tenant_quotas={"a": quota(topics=1)})
    lim.acquire_topic("a")
    lim.release_topic("a")
    assert lim.prune(0.0) == 1
    assert lim.quota_of("a") == quota(topics=1)
    assert lim.acquire_topic("a") is None
    assert lim.acquire_topic("a") == Refused(Reason.TOPICS, Layer.TENANT)


# ---------------------------------------------------------------------- refusal counting


def test_every_refusal_is_counted_under_the_tenant_that_asked() -> None:
    lim = limits(node=quota(connections=1), default=quota(publish=1.0, topics=0), rate_wait=0.0)
    lim.admit_publish("a", 0.0)
    lim.admit_publish("a", 0.0)
    lim.admit_publish("a", 0.0)
    lim.acquire_topic("b")
    lim.acquire_connection("a")
    lim.acquire_connection("b")
    lim.count_refusal("b", "not_authorized")
    lim.count_refusal("b", Reason.TOPICS)
    assert lim.refusals == {
        ("a", "publish_rate"): 2,
        ("b", "topics"): 2,
        ("b", "connections"): 1,
        ("b", "not_authorized"): 1,
    }
    assert all(type(reason) is str for _, reason in lim.refusals)


def test_admitted_requests_are_not_counted() -> None:
    lim = limits()
    lim.admit_publish("a", 0.0)
    lim.admit_connect("a", 0.0)
    lim.admit_tcp(0.0)
    lim.acquire_connection("a")
    lim.acquire_session("a", force=True)
    assert lim.refusals == {}


# ---------------------------------------------------------------------- contract


def test_reason_layer_and_refused() -> None:
    assert [r.value for r in Reason] == [
        "connection_rate",
        "connections",
        "sessions",
        "topics",
        "publish_rate",
        "tcp_rate",
    ]
    assert [layer.value for layer in Layer] == ["node", "tenant"]
    refused = Refused(Reason.TOPICS, Layer.NODE)
    assert f"{refused.layer} {refused.reason}" == "node topics"
    with pytest.raises(dataclasses.FrozenInstanceError):
        refused.layer = Layer.TENANT  # type: ignore[misc]


def test_settings_are_readable() -> None:
    lim = Limits(BIG, quota(topics=1), rate_wait=0.25, burst_seconds=2.0, tcp_rate=5.0, now=100.0)
    assert (lim.rate_wait, lim.burst_seconds, lim.tcp_rate) == (0.25, 2.0, 5.0)
    assert lim.node_quota == BIG
    assert lim.default_quota == quota(topics=1)
    # burst = 5/s x 2 s = 10 TCP connections at once.
    assert [lim.admit_tcp(100.0) for _ in range(10)] == [0.0] * 10
    assert lim.admit_tcp(100.0) == 0.2


@pytest.mark.parametrize("name", ["rate_wait", "burst_seconds", "tcp_rate"])
@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_invalid_settings_are_refused(name: str, bad: float) -> None:
    values = {"rate_wait": 1.0, "burst_seconds": 1.0, "tcp_rate": 1.0, name: bad}
    with pytest.raises(ValueError, match=name):
        Limits(
            BIG,
            BIG,
            rate_wait=values["rate_wait"],
            burst_seconds=values["burst_seconds"],
            tcp_rate=values["tcp_rate"],
            now=0.0,
        )


def test_set_timing_changes_burst_and_wait_for_every_bucket() -> None:
    limits = Limits(
        Quota(),
        Quota().replace(max_publish_rate=1.0),
        rate_wait=0.0,
        burst_seconds=2.0,
        tcp_rate=1.0,
        now=0.0,
    )
    assert [limits.admit_publish("t", 0.0) for _ in range(3)][:2] == [0.0, 0.0]
    assert isinstance(limits.admit_publish("t", 0.0), Refused)
    limits.set_timing(1.0, 5.0, now=0.0)  # 3 more tokens at once, and waits up to 1 s
    assert [limits.admit_publish("t", 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limits.admit_publish("t", 0.0) == pytest.approx(1.0)  # the next token, waited for
    assert isinstance(limits.admit_publish("t", 0.0), Refused)  # 2 s away: past the bound
    assert (limits.rate_wait, limits.burst_seconds) == (1.0, 5.0)
    with pytest.raises(ValueError, match="burst_seconds"):
        limits.set_timing(1.0, float("nan"), now=0.0)
    assert (limits.rate_wait, limits.burst_seconds) == (1.0, 5.0)
