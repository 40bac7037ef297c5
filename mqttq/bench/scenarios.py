"""Scenario plans: which clients publish where, who subscribes to what, who expects what.

A plan is pure data, built once in the parent and sent to every worker process; each
worker takes the clients whose index falls in its slice (index modulo worker count), so
publisher i and subscriber i of a p2p pair always share a worker.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from mqttq.bench.options import BenchUsageError

SCENARIOS = ("p2p", "fan-in", "fan-out", "persistent", "shared")


@dataclass(frozen=True, slots=True)
class PublisherSpec:
    index: int
    client_id: str
    topic: str


@dataclass(frozen=True, slots=True)
class SubscriberSpec:
    index: int
    client_id: str
    topic_filter: str
    expects: tuple[int, ...] | None
    """Publisher indexes whose every message this subscriber must receive; None = all.
    Members of a shared group expect nothing on their own: the group does."""
    group: str | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """One scenario's clients and delivery expectations."""

    scenario: str
    run_id: str
    publishers: tuple[PublisherSpec, ...]
    subscribers: tuple[SubscriberSpec, ...]
    receipts_per_message: int
    """How many deliveries one published message should cause in total."""
    persistent: bool = False
    shared_group: str | None = None

    @property
    def clients(self) -> int:
        return len(self.publishers) + len(self.subscribers)

    def slice(
        self, worker: int, workers: int
    ) -> tuple[tuple[PublisherSpec, ...], tuple[SubscriberSpec, ...]]:
        """The publishers and subscribers run by worker `worker` of `workers`."""
        return (
            tuple(p for p in self.publishers if p.index % workers == worker),
            tuple(s for s in self.subscribers if s.index % workers == worker),
        )

    def expected_publishers(self, subscriber: SubscriberSpec) -> tuple[int, ...]:
        """Publisher indexes whose messages `subscriber` must each receive once."""
        if subscriber.group is not None:
            return ()
        if subscriber.expects is None:
            return tuple(p.index for p in self.publishers)
        return subscriber.expects


def new_run_id() -> str:
    """A short random token that keeps the topics and client ids of two runs apart."""
    return secrets.token_hex(3)


def _ids(run_id: str, role: str, index: int) -> str:
    # At most 23 characters so that every 3.1.1 broker must accept it [MQTT-3.1.3-5].
    return f"mqb{run_id}{role}{index}"


def _require(name: str, value: int, minimum: int = 1) -> None:
    if value < minimum:
        raise BenchUsageError(f"--{name} must be at least {minimum}, got {value}")
    if value > 1_000_000:
        raise BenchUsageError(f"--{name} must be at most 1000000, got {value}")


def p2p(prefix: str, pairs: int, run_id: str | None = None) -> Plan:
    """N pairs; publisher i publishes on its own topic, subscriber i subscribes to it."""
    _require("pairs", pairs)
    run = run_id or new_run_id()
    base = f"{prefix}/{run}/p2p"
    return Plan(
        scenario="p2p",
        run_id=run,
        publishers=tuple(PublisherSpec(i, _ids(run, "p", i), f"{base}/{i}") for i in range(pairs)),
        subscribers=tuple(
            SubscriberSpec(i, _ids(run, "s", i), f"{base}/{i}", (i,)) for i in range(pairs)
        ),
        receipts_per_message=1,
    )


def fan_in(prefix: str, publishers: int, subscribers: int, run_id: str | None = None) -> Plan:
    """P publishers on their own topics; S subscribers each receive all on a wildcard."""
    return _wildcard_plan("fan-in", prefix, publishers, subscribers, run_id, persistent=False)


def fan_out(prefix: str, publishers: int, subscribers: int, run_id: str | None = None) -> Plan:
    """P publishers (usually 1) on one topic; every one of S subscribers receives all."""
    _require("publishers", publishers)
    _require("subscribers", subscribers)
    run = run_id or new_run_id()
    topic = f"{prefix}/{run}/fan-out"
    return Plan(
        scenario="fan-out",
        run_id=run,
        publishers=tuple(PublisherSpec(i, _ids(run, "p", i), topic) for i in range(publishers)),
        subscribers=tuple(
            SubscriberSpec(i, _ids(run, "s", i), topic, None) for i in range(subscribers)
        ),
        receipts_per_message=subscribers,
    )


def persistent(prefix: str, publishers: int, subscribers: int, run_id: str | None = None) -> Plan:
    """S persistent-session subscribers go offline, P publishers fill their queues, the
    subscribers come back and drain the backlog [MQTT-3.1.2-5]."""
    return _wildcard_plan("persistent", prefix, publishers, subscribers, run_id, persistent=True)


def _wildcard_plan(
    scenario: str,
    prefix: str,
    publishers: int,
    subscribers: int,
    run_id: str | None,
    *,
    persistent: bool,
) -> Plan:
    """Publisher i on `<base>/i`; every subscriber on `<base>/+` receives them all."""
    _require("publishers", publishers)
    _require("subscribers", subscribers)
    run = run_id or new_run_id()
    base = f"{prefix}/{run}/{scenario}"
    return Plan(
        scenario=scenario,
        run_id=run,
        publishers=tuple(
            PublisherSpec(i, _ids(run, "p", i), f"{base}/{i}") for i in range(publishers)
        ),
        subscribers=tuple(
            SubscriberSpec(i, _ids(run, "s", i), f"{base}/+", None) for i in range(subscribers)
        ),
        receipts_per_message=subscribers,
        persistent=persistent,
    )


def shared(
    prefix: str, publishers: int, subscribers: int, group: str = "bench", run_id: str | None = None
) -> Plan:
    """P publishers; S members of one `$share/<group>/...` subscription share the load, each
    message going to exactly one member [MQTT-4.8.2]."""
    _require("publishers", publishers)
    _require("subscribers", subscribers)
    if not group or any(c in group for c in "/+#"):
        raise BenchUsageError(f"--group must not be empty nor contain '/', '+' or '#': {group!r}")
    run = run_id or new_run_id()
    base = f"{prefix}/{run}/shared"
    return Plan(
        scenario="shared",
        run_id=run,
        publishers=tuple(
            PublisherSpec(i, _ids(run, "p", i), f"{base}/{i}") for i in range(publishers)
        ),
        subscribers=tuple(
            SubscriberSpec(i, _ids(run, "s", i), f"$share/{group}/{base}/+", None, group)
            for i in range(subscribers)
        ),
        receipts_per_message=1,
        shared_group=group,
    )
