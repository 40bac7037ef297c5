"""Micro-benchmark of the routing layer (a script, not a test): match() and route() per second.

Builds 100k subscriptions (10k clients x 10): 90% over a device-style topic tree (a fifth
of those with '+' or '#', a few `$share`), 10% one `inbox/<client>` per client. Then times
SubscriptionTrie.match and Router.route on random topic names of two kinds: device topics
(fan-out, about 27 matching subscriptions each) and inbox topics (exactly one subscriber,
the hot path).

    python benchmarks/micro/routing_micro.py [--subscriptions 100000] [--seconds 1.0] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import TypeVar

from mqttq.model import Message, Subscription
from mqttq.routing.router import Router
from mqttq.routing.trie import SubscriptionTrie

T = TypeVar("T")

SITES = 100
DEVICES_PER_SITE = 100
METRICS = ("temp", "humidity", "pressure", "battery", "status")


def _filter(rng: random.Random) -> str:
    site = rng.randrange(SITES)
    device = rng.randrange(DEVICES_PER_SITE)
    metric = rng.choice(METRICS)
    kind = rng.random()
    if kind < 0.80:
        return f"site/{site}/dev/{device}/{metric}"
    if kind < 0.90:
        return f"site/{site}/dev/+/{metric}"
    if kind < 0.97:
        return f"site/{site}/dev/{device}/#"
    if kind < 0.995:
        return f"site/+/dev/{device}/{metric}"
    return f"$share/workers/site/{site}/#"


def _inbox(client: int) -> str:
    return f"inbox/client-{client}"


def _topic(rng: random.Random) -> str:
    site = rng.randrange(SITES)
    device = rng.randrange(DEVICES_PER_SITE)
    return f"site/{site}/dev/{device}/{rng.choice(METRICS)}"


def _rate(call: Callable[[T], object], arguments: list[T], seconds: float) -> float:
    calls = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for argument in arguments:
            call(argument)
        calls += len(arguments)
        now = time.perf_counter()
        if now >= deadline:
            return calls / (now - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--subscriptions", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    clients = max(1, args.subscriptions // 10)

    trie: SubscriptionTrie[str, int] = SubscriptionTrie()
    router = Router()
    started = time.perf_counter()
    for number in range(args.subscriptions):
        client_id = f"client-{number % clients}"
        topic_filter = _inbox(number) if number < clients else _filter(rng)
        router.subscribe(client_id, Subscription(topic_filter, qos=1))
        if not topic_filter.startswith("$share/"):
            trie.add(topic_filter, client_id, number)
    build = time.perf_counter() - started

    print(f"subscriptions: {args.subscriptions} ({clients} clients), built in {build:.2f} s")
    scenarios = {
        "fan-out": [_topic(rng) for _ in range(10_000)],
        "one subscriber": [_inbox(rng.randrange(clients)) for _ in range(10_000)],
    }
    for name, topics in scenarios.items():
        matched = sum(len(trie.match(t)) for t in topics) / len(topics)
        messages = [Message(topic=t, payload=b"x", qos=1) for t in topics]
        delivered = sum(len(router.route(m, _online)) for m in messages) / len(messages)
        match_rate = _rate(trie.match, topics, args.seconds)
        route_rate = _rate(lambda m: router.route(m, _online), messages, args.seconds)
        print(f"[{name}] avg matches/topic {matched:.2f}, avg deliveries/message {delivered:.2f}")
        print(f"  SubscriptionTrie.match: {match_rate:>12,.0f} calls/s")
        print(f"  Router.route:           {route_rate:>12,.0f} calls/s")


def _online(_client_id: str) -> bool:
    return True


if __name__ == "__main__":
    main()
