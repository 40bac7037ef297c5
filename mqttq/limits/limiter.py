"""Limits: the node layer and the tenant layer of every rate and count limit.

Two layers, both checked, node first. The node layer protects the node: its quota
(`[mqtt_limit.cluster]`) bounds the total of every tenant. The tenant layer isolates
tenants: each tenant has its own buckets and counts, sized by its quota, so one tenant at its
limit never uses up another's. A request passes only if both admit it; when one refuses,
nothing is consumed at either (the node token is refunded, the node count released).

Rate limits are token buckets (mqttq.limits.bucket): a request waits for a token up to
`rate_wait` seconds, then is refused. Count limits (mqttq.limits.counter) refuse at once.
Pure logic: the caller passes `now`; nothing here reads a clock, waits or does I/O.

RobustMQ defects (research/peers.md section 2) this design does not have:
- publish limiter never called: `admit_publish` is the publish check, node and tenant.
- tenant connect limiter built from the publish rate (and its setter filling the publish
  map): each layer has a connect bucket from `max_connection_rate` and a separate publish
  bucket from `max_publish_rate`.
- waits that cannot fail (`until_ready`), so "connection rate exceeded" was unreachable: a
  wait longer than `rate_wait` is refused with a Reason.
- accept-loop wait serialising accepts: `admit_tcp` returns the delay; the caller waits per
  connection.
- counts compared with `>` (limit + 1 admitted): `CountLimit` admits only below the limit.
- rate setters without callers, rates fixed at start: `set_node_quota`, `set_default_quota`
  and `set_tenant_quota` change live buckets and counts at once.
- tenant limiters never evicted: `prune` drops idle ones; the next request recreates them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from mqttq.limits.bucket import TokenBucket
from mqttq.limits.counter import CountLimit
from mqttq.limits.quota import Quota

__all__ = ["NO_TENANT", "Layer", "Limits", "Reason", "Refused"]

NO_TENANT: Final = ""
"""The tenant `admit_tcp` refusals are counted under: none is known before MQTT parsing."""


class Reason(StrEnum):
    """Why a limit refused a request (the `reason` label of the refusal metrics)."""

    CONNECTION_RATE = "connection_rate"
    CONNECTIONS = "connections"
    SESSIONS = "sessions"
    TOPICS = "topics"
    PUBLISH_RATE = "publish_rate"
    TCP_RATE = "tcp_rate"


class Layer(StrEnum):
    """Which layer refused: the node's own limit or the tenant's quota."""

    NODE = "node"
    TENANT = "tenant"


@dataclass(frozen=True, slots=True)
class Refused:
    """A refusal: nothing was consumed at either layer."""

    reason: Reason
    layer: Layer


class _LayerLimits:
    """One layer's buckets and counts (the node's, or one tenant's), sized by a Quota."""

    __slots__ = ("connect", "connections", "publish", "sessions", "topics")

    def __init__(self, quota: Quota, burst_seconds: float, now: float) -> None:
        connect_rate = quota.max_connection_rate
        publish_rate = quota.max_publish_rate
        self.connect = TokenBucket(connect_rate, connect_rate * burst_seconds, now)
        self.publish = TokenBucket(publish_rate, publish_rate * burst_seconds, now)
        self.connections = CountLimit(quota.max_connections_per_node)
        self.sessions = CountLimit(quota.max_sessions)
        self.topics = CountLimit(quota.max_topics)

    def apply(self, quota: Quota, burst_seconds: float, now: float) -> None:
        connect_rate = quota.max_connection_rate
        publish_rate = quota.max_publish_rate
        self.connect.set_rate(connect_rate, connect_rate * burst_seconds, now)
        self.publish.set_rate(publish_rate, publish_rate * burst_seconds, now)
        self.connections.set_limit(quota.max_connections_per_node)
        self.sessions.set_limit(quota.max_sessions)
        self.topics.set_limit(quota.max_topics)

    def set_others(self, counts: Mapping[str, int] | None) -> None:
        """What other nodes hold of these counts (None: nothing)."""
        counts = counts or {}
        self.connections.others = max(0, counts.get("connections", 0))
        self.sessions.others = max(0, counts.get("sessions", 0))
        self.topics.others = max(0, counts.get("topics", 0))

    def usage(self) -> dict[str, int]:
        return {
            "connections": self.connections.count,
            "sessions": self.sessions.count,
            "topics": self.topics.count,
        }

    def idle(self, now: float) -> bool:
        """Nothing held and both buckets full: dropping it loses nothing."""
        return (
            self.connections.count == 0
            and self.sessions.count == 0
            and self.topics.count == 0
            and self.connect.level(now) >= self.connect.capacity
            and self.publish.level(now) >= self.publish.capacity
        )


def _check_seconds(name: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


class Limits:
    """Every limit of the node and of its tenants.

    Rates (`admit_*`) return the delay in seconds (>= 0, at most `rate_wait`) after which
    the request may proceed, its tokens already taken, or a Refused. Counts (`acquire_*`)
    return None when the resource is held, or a Refused. Each check asks the node layer
    first, then the tenant's; a refusal consumes nothing at either. Every Refused returned
    is counted in `refusals` under the tenant that asked and the reason's value.

    Rate bounds: a tenant's token is taken at the time its request will proceed, so over
    any window the proceed times of one tenant's requests never exceed its rate x window +
    burst. The node's token is taken at the node's own earliest time (a node bucket cannot
    hold tokens for later without stalling every other tenant), so the node bound holds
    for node token times; a request's proceed time follows its node token by at most
    `rate_wait` (the tenant's extra wait).

    Tenant limiters are created on a tenant's first request with `quota_of(tenant)`.
    Quota changes (`set_*_quota`) take effect at once, for existing limiters too.
    A quota rate of 0 refuses every request at its layer; a count of 0 refuses every
    new acquire.
    """

    __slots__ = (
        "_burst_seconds",
        "_clock",
        "_default_quota",
        "_node",
        "_node_quota",
        "_rate_wait",
        "_remote",
        "_tcp",
        "_tenant_quotas",
        "_tenants",
        "refusals",
    )

    refusals: dict[tuple[str, str], int]
    """(tenant, reason) -> refusals so far; reasons are Reason values or the broker's own."""

    def __init__(
        self,
        node: Quota,
        tenant_default: Quota,
        *,
        rate_wait: float,
        burst_seconds: float,
        tcp_rate: float,
        now: float,
        tenant_quotas: Mapping[str, Quota] | None = None,
    ) -> None:
        """`rate_wait`: the longest a request may wait for a token (s). Each bucket's burst
        is its rate x `burst_seconds` (at least one token when the rate is positive).
        `tcp_rate`: new TCP connections/s, node only. Raises ValueError for a negative,
        NaN or infinite `rate_wait`, `burst_seconds` or `tcp_rate`."""
        _check_seconds("rate_wait", rate_wait)
        _check_seconds("burst_seconds", burst_seconds)
        _check_seconds("tcp_rate", tcp_rate)
        self._rate_wait = float(rate_wait)
        self._burst_seconds = float(burst_seconds)
        self._clock = now
        self._node_quota = node
        self._node = _LayerLimits(node, self._burst_seconds, now)
        self._tcp = TokenBucket(tcp_rate, tcp_rate * self._burst_seconds, now)
        self._default_quota = tenant_default
        self._tenant_quotas: dict[str, Quota] = dict(tenant_quotas or {})
        self._tenants: dict[str, _LayerLimits] = {}
        self._remote: dict[str, Mapping[str, int]] = {}
        self.refusals = {}

    # ------------------------------------------------------------------ settings

    @property
    def rate_wait(self) -> float:
        """The longest a request may wait for a token (seconds)."""
        return self._rate_wait

    @property
    def burst_seconds(self) -> float:
        """Seconds of rate each bucket holds as burst."""
        return self._burst_seconds

    @property
    def node_quota(self) -> Quota:
        """The node layer's quota."""
        return self._node_quota

    @property
    def default_quota(self) -> Quota:
        """The quota of every tenant without its own."""
        return self._default_quota

    @property
    def tcp_rate(self) -> float:
        """New TCP connections per second admitted by `admit_tcp`."""
        return self._tcp.rate

    def quota_of(self, tenant: str) -> Quota:
        """`tenant`'s own quota if it has one, else the default quota."""
        return self._tenant_quotas.get(tenant, self._default_quota)

    def set_node_quota(self, quota: Quota, now: float) -> None:
        """New node-layer limits, effective at once."""
        self._tick(now)
        self._node.apply(quota, self._burst_seconds, now)
        self._node_quota = quota

    def set_default_quota(self, quota: Quota, now: float) -> None:
        """New default quota, effective at once for every tenant without its own."""
        self._tick(now)
        self._default_quota = quota
        for tenant, limiter in self._tenants.items():
            if tenant not in self._tenant_quotas:
                limiter.apply(quota, self._burst_seconds, now)

    def set_tenant_quota(self, tenant: str, quota: Quota | None, now: float) -> None:
        """`tenant`'s own quota (None: back to the default quota), effective at once."""
        self._tick(now)
        if quota is None:
            self._tenant_quotas.pop(tenant, None)
        else:
            self._tenant_quotas[tenant] = quota
        limiter = self._tenants.get(tenant)
        if limiter is not None:
            limiter.apply(self.quota_of(tenant), self._burst_seconds, now)

    def set_timing(self, rate_wait: float, burst_seconds: float, now: float) -> None:
        """New longest wait for a token and new burst (seconds of rate) for every bucket,
        effective at once. Raises ValueError for a negative, NaN or infinite value
        (nothing changes)."""
        _check_seconds("rate_wait", rate_wait)
        _check_seconds("burst_seconds", burst_seconds)
        self._tick(now)
        self._rate_wait = float(rate_wait)
        burst = self._burst_seconds = float(burst_seconds)
        self._node.apply(self._node_quota, burst, now)
        for tenant, limiter in self._tenants.items():
            limiter.apply(self.quota_of(tenant), burst, now)
        self._tcp.set_rate(self._tcp.rate, self._tcp.rate * burst, now)

    def set_tcp_rate(self, rate: float, now: float) -> None:
        """New TCP connection rate, effective at once. Raises ValueError for a negative,
        NaN or infinite rate (nothing changes)."""
        _check_seconds("tcp_rate", rate)
        self._tick(now)
        self._tcp.set_rate(rate, rate * self._burst_seconds, now)

    def set_cluster_usage(self, usage: Mapping[str, Mapping[str, int]]) -> None:
        """What the other nodes of the cluster hold, by tenant (`{"connections": n,
        "sessions": n, "topics": n}`; a tenant not named holds nothing elsewhere).
        From now on a tenant's count limits admit only while this node's own count plus
        the others' stays below the tenant's quota; the node layer stays this node's own."""
        self._remote = {tenant: dict(counts) for tenant, counts in usage.items()}
        for tenant, limiter in self._tenants.items():
            limiter.set_others(self._remote.get(tenant))

    # ------------------------------------------------------------------ rates

    def admit_tcp(self, now: float) -> float | Refused:
        """A new TCP connection, before any MQTT parsing (node layer only): the delay
        before serving it, or Refused(TCP_RATE, NODE), counted under NO_TENANT."""
        wait = self._tcp.reserve(now, self._rate_wait)
        if wait is None:
            return self._refuse(NO_TENANT, Reason.TCP_RATE, Layer.NODE)
        return wait

    def admit_connect(self, tenant: str, now: float) -> float | Refused:
        """A CONNECT of `tenant`: node `max_connection_rate`, then the tenant's
        `max_connection_rate`. The delay is the larger of the two layers' waits; a layer
        whose wait would exceed `rate_wait` refuses (Reason.CONNECTION_RATE)."""
        node = self._node.connect
        own = self._tenants.get(tenant) or self._open(tenant, now)
        return self._admit(tenant, now, node, own.connect, Reason.CONNECTION_RATE)

    def admit_publish(self, tenant: str, now: float) -> float | Refused:
        """A PUBLISH of `tenant`: node `max_publish_rate`, then the tenant's. The delay
        is the larger of the two layers' waits; a layer whose wait would exceed
        `rate_wait` refuses (Reason.PUBLISH_RATE)."""
        own = self._tenants.get(tenant)
        if own is None:
            own = self._open(tenant, now)
        node = self._node.publish
        # Per PUBLISH: the usual case (both buckets hold a token) costs two reserves.
        if node.reserve(now, 0.0) == 0.0:
            own_wait = own.publish.reserve(now, self._rate_wait)
            if own_wait is not None:
                return own_wait
            node.refund(now)
            return self._refuse(tenant, Reason.PUBLISH_RATE, Layer.TENANT)
        return self._admit(tenant, now, node, own.publish, Reason.PUBLISH_RATE)

    def _admit(
        self, tenant: str, now: float, node: TokenBucket, own: TokenBucket, reason: Reason
    ) -> float | Refused:
        rate_wait = self._rate_wait
        node_wait = node.reserve(now, rate_wait)
        if node_wait is None:
            return self._refuse(tenant, reason, Layer.NODE)
        # The tenant's token is taken when the request will really proceed (after the node
        # wait), so the tenant's own bound holds for the times its requests proceed. The
        # tenant refuses exactly when its own wait from `now` would exceed `rate_wait`.
        own_wait = own.reserve(now + node_wait, rate_wait - node_wait)
        if own_wait is None:
            node.refund(now)
            return self._refuse(tenant, reason, Layer.TENANT)
        return node_wait + own_wait

    # ------------------------------------------------------------------ counts

    def acquire_connection(self, tenant: str) -> Refused | None:
        """Hold one connection of `tenant` (node `max_connections_per_node`, then the
        tenant's): None when held, else Refused(CONNECTIONS) and nothing held."""
        own = self._tenants.get(tenant) or self._open(tenant, self._clock)
        return self._acquire(
            tenant, self._node.connections, own.connections, Reason.CONNECTIONS, False
        )

    def release_connection(self, tenant: str) -> None:
        """Give back one connection of `tenant` (ignored if it holds none)."""
        own = self._tenants.get(tenant)
        if own is not None:
            _release(self._node.connections, own.connections)

    def acquire_session(self, tenant: str, *, force: bool = False) -> Refused | None:
        """Hold one session of `tenant` (node `max_sessions`, then the tenant's): None
        when held, else Refused(SESSIONS). `force` holds it even past the limits
        (sessions restored at start) and always returns None."""
        own = self._tenants.get(tenant) or self._open(tenant, self._clock)
        return self._acquire(tenant, self._node.sessions, own.sessions, Reason.SESSIONS, force)

    def release_session(self, tenant: str) -> None:
        """Give back one session of `tenant` (ignored if it holds none)."""
        own = self._tenants.get(tenant)
        if own is not None:
            _release(self._node.sessions, own.sessions)

    def acquire_topic(self, tenant: str, *, force: bool = False) -> Refused | None:
        """Hold one topic of `tenant` (node `max_topics`, then the tenant's): None when
        held, else Refused(TOPICS). `force` holds it even past the limits (state restored
        at start) and always returns None."""
        own = self._tenants.get(tenant) or self._open(tenant, self._clock)
        return self._acquire(tenant, self._node.topics, own.topics, Reason.TOPICS, force)

    def release_topic(self, tenant: str) -> None:
        """Give back one topic of `tenant` (ignored if it holds none)."""
        own = self._tenants.get(tenant)
        if own is not None:
            _release(self._node.topics, own.topics)

    def _acquire(
        self, tenant: str, node: CountLimit, own: CountLimit, reason: Reason, force: bool
    ) -> Refused | None:
        if force:
            node.force_acquire()
            own.force_acquire()
            return None
        if not node.try_acquire():
            return self._refuse(tenant, reason, Layer.NODE)
        if not own.try_acquire():
            node.release()
            return self._refuse(tenant, reason, Layer.TENANT)
        return None

    # ------------------------------------------------------------------ reading

    def usage(self, tenant: str) -> dict[str, int]:
        """`tenant`'s held connections, sessions and topics (zeros if it has no limiter)."""
        own = self._tenants.get(tenant)
        if own is None:
            return {"connections": 0, "sessions": 0, "topics": 0}
        return own.usage()

    def node_usage(self) -> dict[str, int]:
        """The node's held connections, sessions and topics (every tenant's together)."""
        return self._node.usage()

    def tenants(self) -> list[str]:
        """The tenants that have a limiter, sorted."""
        return sorted(self._tenants)

    def prune(self, now: float) -> int:
        """Drop the limiters of tenants holding nothing whose buckets are full at `now`
        (nothing is lost: the next request recreates them, full); returns how many."""
        self._tick(now)
        idle = [tenant for tenant, own in self._tenants.items() if own.idle(now)]
        for tenant in idle:
            del self._tenants[tenant]
        return len(idle)

    # ------------------------------------------------------------------ refusals

    def count_refusal(self, tenant: str, reason: str) -> None:
        """Count one refusal of `tenant` for `reason` (the broker's own reasons:
        not_authorized, bad_credentials, acl_publish, ...)."""
        key = (tenant, str(reason))
        self.refusals[key] = self.refusals.get(key, 0) + 1

    def _refuse(self, tenant: str, reason: Reason, layer: Layer) -> Refused:
        self.count_refusal(tenant, reason.value)
        return Refused(reason, layer)

    # ------------------------------------------------------------------ internals

    def _open(self, tenant: str, now: float) -> _LayerLimits:
        self._tick(now)
        # Created full: a bucket full at an earlier `now` is full at any later one.
        own = _LayerLimits(self.quota_of(tenant), self._burst_seconds, self._clock)
        if self._remote:
            own.set_others(self._remote.get(tenant))
        self._tenants[tenant] = own
        return own

    def _tick(self, now: float) -> None:
        self._clock = max(self._clock, now)


def _release(node: CountLimit, own: CountLimit) -> None:
    # Only a tenant that holds one gives one back to the node too, so the node count
    # stays the sum of the tenants' even after an unbalanced release.
    if own.count > 0:
        own.release()
        node.release()
