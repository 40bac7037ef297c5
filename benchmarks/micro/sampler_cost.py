"""What the dashboard's sampler costs the broker (issue 34; a script, not a test).

Times, with `time.thread_time` (CPU of the event loop's thread, as the sampler counts
it), one sample of a broker holding N sessions (half of them connected): reading the
counters (`broker_counters`, one pass over the sessions) and making the row. The
sampler takes one every `[admin] sample_interval` seconds (5 by default), so its share
of one core is the cost of a sample divided by the interval.

    python benchmarks/micro/sampler_cost.py [--sessions 0,10000,100000] [--samples 200]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from mqttq.broker.sampler import Sampler, broker_counters
from mqttq.broker.server import Broker
from mqttq.config import Settings
from mqttq.storage.memory import MemoryStorage


@dataclass
class _Session:
    """What the sampler reads of a session: whether a client is attached."""

    client: object | None


def cost(sessions: int, samples: int) -> float:
    """CPU seconds per sample with `sessions` sessions."""
    broker = Broker(Settings(), MemoryStorage())
    table: dict[str, object] = broker.hub.sessions  # type: ignore[assignment]
    for i in range(sessions):
        table[f"client-{i}"] = _Session(object() if i % 2 else None)
    sampler = Sampler(lambda at: broker_counters(broker, at), node_id="bench", interval=5.0)
    clock = [0.0]
    sampler.clock = lambda: clock[0]
    for _ in range(samples):
        clock[0] += 5.0
        sampler.sample_now()
    assert sampler.rows[-1]["connections"] == sessions // 2
    return sampler.statistics()["cpu_s"] / samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="0,10000,100000")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--interval", type=float, default=5.0)
    args = parser.parse_args()
    print(f"{'sessions':>10} {'CPU per sample':>16} {'share of one core':>20}")
    for sessions in (int(n) for n in args.sessions.split(",")):
        per = cost(sessions, args.samples)
        share = per / args.interval * 100
        print(f"{sessions:>10,} {per * 1e3:>13.3f} ms {share:>19.4f}%")
    print(f"(share at one sample per {args.interval:g} s; measured {time.strftime('%F %T')})")


if __name__ == "__main__":
    main()
