"""The pure arithmetic of cluster-wide tenant counts (Hypothesis): the sum over the other
nodes, node states from heartbeat age, the counts' encoding, and admission against this
node's exact count plus the others'."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mqttq.cluster.nodes import (
    COUNT_FIELDS,
    NodeRecord,
    NodeState,
    decode_counts,
    encode_counts,
    node_state,
    sum_counts,
)
from mqttq.limits.limiter import Layer, Limits, Reason, Refused
from mqttq.limits.quota import Quota

counts = st.fixed_dictionaries({name: st.integers(0, 1000) for name in COUNT_FIELDS})
tenants = st.dictionaries(st.sampled_from(["default", "acme", "globex", "t\u00e9"]), counts)
nodes = st.lists(st.tuples(st.sampled_from(["n1", "n2", "n3", "n4"]), tenants), max_size=6)


@given(nodes, st.sampled_from(["n1", "n2", "n9"]))
def test_sum_is_the_other_nodes_total(
    listed: list[tuple[str, dict[str, dict[str, int]]]], me: str
) -> None:
    total = sum_counts(listed, exclude=me)
    latest = {node: values for node, values in listed if node != me}
    for tenant in {t for values in latest.values() for t in values}:
        expected = {
            name: sum(values.get(tenant, {}).get(name, 0) for values in latest.values())
            for name in COUNT_FIELDS
        }
        if any(expected.values()):
            assert total[tenant] == expected
        else:
            assert tenant not in total
    assert set(total) <= {t for values in latest.values() for t in values}


@given(counts)
def test_counts_round_trip(values: dict[str, int]) -> None:
    assert decode_counts(encode_counts(values)) == values


@given(st.binary(max_size=30))
def test_garbage_counts_decode_to_none_or_valid(raw: bytes) -> None:
    decoded = decode_counts(raw)
    assert decoded is None or (set(decoded) == set(COUNT_FIELDS) and min(decoded.values()) >= 0)


@given(st.integers(100, 60_000), st.floats(0, 1000, allow_nan=False))
def test_state_follows_the_heartbeat_age(interval_ms: int, age_s: float) -> None:
    state = node_state(1000.0, interval_ms, 1000.0 + age_s)
    age_ms = age_s * 1000
    if age_ms > 3 * interval_ms:
        assert state is NodeState.GONE
    elif age_ms > 2 * interval_ms:
        assert state is NodeState.STALE
    else:
        assert state is NodeState.ALIVE
    assert node_state(None, interval_ms, 0.0) is NodeState.GONE


@given(st.integers(0, 20), st.integers(0, 20), st.integers(0, 30))
def test_a_tenant_admits_while_own_plus_others_is_below_its_quota(
    limit: int, others: int, attempts: int
) -> None:
    limits = Limits(
        Quota(),
        Quota(max_connections_per_node=limit),
        rate_wait=0.0,
        burst_seconds=1.0,
        tcp_rate=1.0,
        now=0.0,
    )
    limits.set_cluster_usage({"acme": {"connections": others, "sessions": 0, "topics": 0}})
    results = [limits.acquire_connection("acme") for _ in range(attempts)]
    admitted = sum(1 for r in results if r is None)
    assert admitted == min(attempts, max(0, limit - others))
    assert all(r == Refused(Reason.CONNECTIONS, Layer.TENANT) for r in results[admitted:])
    # The others leave (their keys expired): room again, up to the limit.
    limits.set_cluster_usage({})
    more = sum(1 for _ in range(attempts) if limits.acquire_connection("acme") is None)
    assert more == min(attempts, limit - admitted)
    # Another tenant and the node layer never see acme's remote counts.
    assert limits.acquire_connection("globex") is None or limit == 0


def test_remote_counts_reach_a_tenant_opened_later_and_a_pruned_one() -> None:
    limits = Limits(
        Quota(), Quota(max_sessions=3), rate_wait=0.0, burst_seconds=1.0, tcp_rate=1.0, now=0.0
    )
    limits.set_cluster_usage({"late": {"connections": 0, "sessions": 3, "topics": 0}})
    assert limits.acquire_session("late") == Refused(Reason.SESSIONS, Layer.TENANT)
    assert limits.prune(10.0) >= 1  # holds nothing: dropped, the remote counts stay known
    assert limits.acquire_session("late") == Refused(Reason.SESSIONS, Layer.TENANT)
    assert limits.acquire_session("late", force=True) is None  # restored state still counts


def test_record_round_trips_through_a_redis_hash() -> None:
    record = NodeRecord(
        node_id="n1",
        host="127.0.0.1",
        ports={"tcp": 1883, "ws": 8083},
        pid=42,
        started_at=1.5,
        heartbeat_at=2.5,
        interval_ms=2000,
        connections=3,
        sessions=4,
        log_consumer_lag=5,
        app_consumer_lag=6,
        admin_url="http://127.0.0.1:18083",
    )
    raw = {k.encode(): v.encode() for k, v in record.to_hash().items()}
    assert NodeRecord.from_hash(raw) == record
    assert NodeRecord.from_hash({b"node_id": b"n1"}) is None
    shown = record.to_json(3.0)
    assert shown["state"] == "alive" and shown["heartbeat_age_s"] == 0.5
