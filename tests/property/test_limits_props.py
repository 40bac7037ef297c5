"""Properties of the pure limit logic (fake clock: generated, sorted request times).

Rates: the "proceed time" of an admitted request is its arrival time + the delay returned.
(1) over any window [t, t + w] the proceed times of admitted requests number at most
    rate * w + capacity; (2) a request is refused only when the bucket is saturated: some
    trailing window [s, now + max_wait] already holds so many proceed times that one more
    would break (1); (3) no delay exceeds max_wait; (4) one bucket's proceed times never go
    backwards. Counts: never above the limit, refused exactly at it, at both layers.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from mqttq.limits import CountLimit, Layer, Limits, Quota, Reason, Refused, TokenBucket

EPS = 1e-6
SLACK = 5e-10
"""A bucket takes a request short of its token by at most 1e-9 (float rounding in the
refill), so a refusal proves the window over its bound by more than this."""
PROPS = settings(max_examples=200, deadline=None)

rates = st.one_of(st.sampled_from([0.0, 0.5, 1.0, 2.0, 4.0, 10.0]), st.floats(0.05, 20.0))
bursts = st.one_of(st.floats(0.0, 12.0), st.sampled_from([0.0, 1.0, 3.0]))
waits = st.one_of(st.floats(0.0, 4.0), st.sampled_from([0.0, 0.5, 1.0, 2.0]))
# Coinciding times (bursts of requests at one instant) matter most: mix a coarse grid in.
instants = st.one_of(st.floats(0.0, 20.0), st.integers(0, 40).map(lambda n: n / 4))
schedules = st.lists(st.tuples(instants, st.integers(1, 6)), max_size=25).map(
    lambda bursts: sorted(t for t, n in bursts for _ in range(n))
)


def capacity(rate: float, burst: float) -> float:
    return max(burst, 1.0) if rate > 0.0 else burst


def check_window_bound(proceeds: Sequence[float], rate: float, cap: float) -> None:
    """(1) for every window: the densest windows start and end at proceed times."""
    times = sorted(proceeds)
    for i, start in enumerate(times):
        for j in range(i, len(times)):
            count = j - i + 1
            assert count <= rate * (times[j] - start) + cap + EPS, (i, j, times)


def saturated(proceeds: Sequence[float], end: float, rate: float, cap: float) -> bool:
    """(2) one more proceed time at `end` would break (1) for some window [s, end]; the
    tightest windows start at a proceed time (or at `end` itself)."""
    inside = sorted(p for p in proceeds if p <= end + EPS)
    return any(
        len(inside) - i + 1 > rate * (end - start) + cap + SLACK
        for i, start in enumerate([*inside, end])
    )


@PROPS
@given(rate=rates, burst=bursts, max_wait=waits, times=schedules)
def test_token_bucket_properties(
    rate: float, burst: float, max_wait: float, times: list[float]
) -> None:
    bucket = TokenBucket(rate, burst, now=0.0)
    cap = capacity(rate, burst)
    proceeds: list[float] = []
    for now in times:
        expected = bucket.delay(now)
        got = bucket.reserve(now, max_wait)
        if got is None:
            assert expected > max_wait
            assert saturated(proceeds, now + max_wait, rate, cap)
            continue
        assert 0.0 <= got <= max_wait  # (3)
        assert abs(got - expected) <= EPS
        if proceeds:
            assert now + got >= proceeds[-1] - EPS  # (4)
        proceeds.append(now + got)
    check_window_bound(proceeds, rate, cap)


@PROPS
@given(
    rate=st.floats(0.1, 20.0),
    burst=bursts,
    max_wait=waits,
    times=schedules,
    refusals=st.lists(st.booleans(), max_size=80),
)
def test_refunded_tokens_leave_the_bucket_as_if_never_taken(
    rate: float, burst: float, max_wait: float, times: list[float], refusals: list[bool]
) -> None:
    """A later layer refusing (refund) is the same as the request never arriving."""
    bucket = TokenBucket(rate, burst, now=0.0)
    twin = TokenBucket(rate, burst, now=0.0)
    for now, later_refuses in zip(times, refusals, strict=False):
        got = bucket.reserve(now, max_wait)
        if got is not None and later_refuses:
            bucket.refund(now)
            continue
        expected = twin.reserve(now, max_wait)
        if got is None or expected is None:
            # Equal up to float rounding: only a wait right at the bound may differ.
            assert got == expected or abs((got or expected or 0.0) - max_wait) <= EPS
        else:
            assert abs(got - expected) <= EPS
        assert abs(bucket.level(now) - twin.level(now)) <= EPS


QUOTA_RATE = {"publish": "max_publish_rate", "connect": "max_connection_rate"}


def rate_quota(kind: str, rate: float) -> Quota:
    return Quota().replace(**{QUOTA_RATE[kind]: rate})


def admit(limits: Limits, kind: str, tenant: str, now: float) -> float | Refused:
    if kind == "publish":
        return limits.admit_publish(tenant, now)
    return limits.admit_connect(tenant, now)


@PROPS
@given(
    kind=st.sampled_from(["publish", "connect"]),
    node_rate=rates,
    tenant_rate=rates,
    burst_seconds=st.sampled_from([0.0, 0.5, 1.0, 2.5]),
    rate_wait=waits,
    times=schedules,
)
def test_limits_one_tenant_rate_properties(
    *,
    kind: str,
    node_rate: float,
    tenant_rate: float,
    burst_seconds: float,
    rate_wait: float,
    times: list[float],
) -> None:
    limits = Limits(
        rate_quota(kind, node_rate),
        rate_quota(kind, tenant_rate),
        rate_wait=rate_wait,
        burst_seconds=burst_seconds,
        tcp_rate=1.0,
        now=0.0,
    )
    node_cap = capacity(node_rate, node_rate * burst_seconds)
    tenant_cap = capacity(tenant_rate, tenant_rate * burst_seconds)
    reason = Reason.PUBLISH_RATE if kind == "publish" else Reason.CONNECTION_RATE
    proceeds: list[float] = []
    refused = 0
    for now in times:
        got = admit(limits, kind, "t", now)
        if isinstance(got, Refused):
            refused += 1
            assert got.reason is reason
            rate, cap = (
                (node_rate, node_cap) if got.layer is Layer.NODE else (tenant_rate, tenant_cap)
            )
            assert saturated(proceeds, now + rate_wait, rate, cap)
            continue
        assert 0.0 <= got <= rate_wait + EPS
        if proceeds:
            assert now + got >= proceeds[-1] - EPS
        proceeds.append(now + got)
    check_window_bound(proceeds, node_rate, node_cap)
    check_window_bound(proceeds, tenant_rate, tenant_cap)
    assert limits.refusals.get(("t", reason.value), 0) == refused


@PROPS
@given(
    node_rate=rates,
    tenant_rates=st.lists(rates, min_size=2, max_size=3),
    burst_seconds=st.sampled_from([0.0, 0.5, 1.0, 2.5]),
    rate_wait=waits,
    requests=st.lists(st.tuples(instants, st.integers(0, 2)), max_size=100).map(sorted),
)
def test_limits_tenants_rate_properties(
    node_rate: float,
    tenant_rates: list[float],
    burst_seconds: float,
    rate_wait: float,
    requests: list[tuple[float, int]],
) -> None:
    """Each tenant keeps its own bound exactly whatever the others do. The node's tokens
    are taken at the node's own proceed time; a tenant's wait may hold a request up to
    rate_wait longer, so on actual proceed times the node bound widens by that much."""
    names = [f"t{i}" for i in range(len(tenant_rates))]
    limits = Limits(
        rate_quota("publish", node_rate),
        Quota(),
        rate_wait=rate_wait,
        burst_seconds=burst_seconds,
        tcp_rate=1.0,
        now=0.0,
        tenant_quotas={
            n: rate_quota("publish", r) for n, r in zip(names, tenant_rates, strict=True)
        },
    )
    node_cap = capacity(node_rate, node_rate * burst_seconds)
    caps = [capacity(r, r * burst_seconds) for r in tenant_rates]
    proceeds: list[list[float]] = [[] for _ in names]
    for now, pick in requests:
        index = pick % len(names)
        got = limits.admit_publish(names[index], now)
        if isinstance(got, Refused):
            if got.layer is Layer.TENANT:
                assert saturated(proceeds[index], now + rate_wait, tenant_rates[index], caps[index])
            else:
                every = [p for ps in proceeds for p in ps]
                assert saturated(every, now + rate_wait, node_rate, node_cap)
            continue
        assert 0.0 <= got <= rate_wait + EPS
        proceeds[index].append(now + got)
    for index, own in enumerate(proceeds):
        check_window_bound(own, tenant_rates[index], caps[index])
    every = [p for ps in proceeds for p in ps]
    check_window_bound(every, node_rate, node_cap + node_rate * rate_wait)


# ---------------------------------------------------------------------- counts


@PROPS
@given(limit=st.integers(0, 6), ops=st.lists(st.booleans(), max_size=60))
def test_count_limit_never_exceeds_and_refuses_exactly_at_the_limit(
    limit: int, ops: list[bool]
) -> None:
    counter = CountLimit(limit)
    for acquire in ops:
        before = counter.count
        if acquire:
            admitted = counter.try_acquire()
            assert admitted == (before < limit)
            assert admitted or before == limit
            assert counter.count == before + int(admitted)
        else:
            counter.release()
            assert counter.count == max(before - 1, 0)
        assert 0 <= counter.count <= limit


@PROPS
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("acquire"), st.just(0)),
            st.tuples(st.just("release"), st.just(0)),
            st.tuples(st.just("force"), st.just(0)),
            st.tuples(st.just("limit"), st.integers(0, 6)),
        ),
        max_size=60,
    )
)
def test_count_limit_with_force_and_live_limits(ops: list[tuple[str, int]]) -> None:
    counter = CountLimit(3)
    for op, value in ops:
        before = counter.count
        if op == "acquire":
            assert counter.try_acquire() == (before < counter.limit)
            assert counter.count <= max(before, counter.limit)
        elif op == "release":
            counter.release()
        elif op == "force":
            counter.force_acquire()
            assert counter.count == before + 1
        else:
            counter.set_limit(value)
            assert counter.count == before
        assert counter.count >= 0


COUNT_FIELD = {
    "connections": "max_connections_per_node",
    "sessions": "max_sessions",
    "topics": "max_topics",
}


def count_quota(limits: dict[str, int]) -> Quota:
    return Quota().replace(**{COUNT_FIELD[k]: v for k, v in limits.items()})


def count_limits() -> st.SearchStrategy[dict[str, int]]:
    return st.fixed_dictionaries({k: st.integers(0, 4) for k in COUNT_FIELD})


def do_acquire(limits: Limits, kind: str, tenant: str) -> Refused | None:
    if kind == "connections":
        return limits.acquire_connection(tenant)
    if kind == "sessions":
        return limits.acquire_session(tenant)
    return limits.acquire_topic(tenant)


def do_release(limits: Limits, kind: str, tenant: str) -> None:
    if kind == "connections":
        limits.release_connection(tenant)
    elif kind == "sessions":
        limits.release_session(tenant)
    else:
        limits.release_topic(tenant)


@PROPS
@given(
    node=count_limits(),
    tenants=st.lists(count_limits(), min_size=1, max_size=3),
    ops=st.lists(
        st.tuples(st.booleans(), st.sampled_from(sorted(COUNT_FIELD)), st.integers(0, 2)),
        max_size=80,
    ),
)
def test_two_layer_counts_never_exceed_either_quota(
    node: dict[str, int],
    tenants: list[dict[str, int]],
    ops: list[tuple[bool, str, int]],
) -> None:
    names = [f"t{i}" for i in range(len(tenants))]
    limits = Limits(
        count_quota(node),
        Quota(),
        rate_wait=1.0,
        burst_seconds=1.0,
        tcp_rate=1.0,
        now=0.0,
        tenant_quotas={n: count_quota(q) for n, q in zip(names, tenants, strict=True)},
    )
    for acquire, kind, index in ops:
        tenant = names[index % len(names)]
        node_before = limits.node_usage()[kind]
        own_before = limits.usage(tenant)[kind]
        own_limit = tenants[index % len(names)][kind]
        if acquire:
            got = do_acquire(limits, kind, tenant)
            if node_before >= node[kind]:
                assert got == Refused(Reason(kind), Layer.NODE)
            elif own_before >= own_limit:
                assert got == Refused(Reason(kind), Layer.TENANT)
            else:
                assert got is None
            held = int(got is None)
            assert limits.usage(tenant)[kind] == own_before + held
            assert limits.node_usage()[kind] == node_before + held
        else:
            do_release(limits, kind, tenant)
        for name, own in zip(names, tenants, strict=True):
            usage = limits.usage(name)
            assert all(usage[k] <= own[k] for k in COUNT_FIELD)
        node_usage = limits.node_usage()
        assert all(node_usage[k] <= node[k] for k in COUNT_FIELD)
        for k in COUNT_FIELD:
            assert node_usage[k] == sum(limits.usage(name)[k] for name in names)
