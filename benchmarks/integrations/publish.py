"""Publish-only load for the integration benchmarks (not a test).

`mqttq bench` always has subscribers; to measure what an integration takes from the broker
alone, this runs the load tool's own publishers (`mqttq.bench`, the same clients, windows
and accounting) with no subscriber: P publishers on `<prefix>/<run>/pub/<i>`, each sending
`--count` QoS 1 messages as fast as `--inflight` allows. Prints the tool's result JSON
(`messages.published`, `messages.acknowledged`, `rates.published_per_s`, PUBACK latency).

    python benchmarks/integrations/publish.py --port 1883 --publishers 10 --count 2000
"""

from __future__ import annotations

import argparse
import json
import sys

from mqttq.bench import run_plan
from mqttq.bench.options import BenchError, BenchOptions
from mqttq.bench.scenarios import Plan, PublisherSpec, new_run_id

TOPIC_PREFIX = "mqttq-bench"
"""First level of every topic published here: the integrations' filter is `mqttq-bench/#`."""


def publish_plan(publishers: int, prefix: str = TOPIC_PREFIX) -> Plan:
    """P publishers on their own topics and nobody subscribed."""
    run = new_run_id()
    return Plan(
        scenario="publish",
        run_id=run,
        publishers=tuple(
            PublisherSpec(i, f"mqb{run}p{i}", f"{prefix}/{run}/pub/{i}") for i in range(publishers)
        ),
        subscribers=(),
        receipts_per_message=0,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--publishers", type=int, default=10)
    parser.add_argument("--count", type=int, help="messages per publisher")
    parser.add_argument("--duration", type=float, help="seconds (instead of --count)")
    parser.add_argument("--qos", type=int, default=1)
    parser.add_argument("--payload", type=int, default=62)
    parser.add_argument("--inflight", type=int, default=100)
    parser.add_argument("--drain-timeout", type=float, default=30.0)
    args = parser.parse_args()
    options = BenchOptions(
        host=args.host,
        port=args.port,
        qos=args.qos,
        protocol=5,
        payload=args.payload,
        duration=args.duration if args.count is None else None,
        count=args.count,
        inflight=args.inflight,
        drain_timeout=args.drain_timeout,
        workers=1,
        topic_prefix=TOPIC_PREFIX,
    )
    try:
        result = run_plan(publish_plan(args.publishers), options)
    except BenchError as exc:
        print(f"publish: error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    print(json.dumps(result))


if __name__ == "__main__":
    main()
