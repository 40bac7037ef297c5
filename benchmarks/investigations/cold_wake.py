"""What a wake-up after idle costs the interpreter on this machine (a script, not a test).

The same small piece of Python work (20 dictionary reads from a 20,000-entry table, about
what the broker's per-message path touches, in kind not in size) is timed back to back,
and again after each of a series of idle gaps in `select`, as the broker sleeps in
`epoll_wait` between messages at 1,000 msg/s. On a virtual CPU that halts when idle, the
caches and the TLB the work needs are cold after the gap: the same work takes several
times as long, and the process's CPU per wake-up grows accordingly. A C broker touches
far less memory per message, so it pays far less of this.

    taskset -c 0 python benchmarks/investigations/cold_wake.py

docs/benchmarks.md (issue 14, section 9) quotes its output.
"""

from __future__ import annotations

import argparse
import os
import random
import select
import time

TABLE = 20_000
READS = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2000, help="work items per gap")
    args = parser.parse_args()
    table = [{f"k{j}": j for j in range(8)} for _ in range(TABLE)]
    picks = [random.randrange(TABLE) for _ in range(READS * args.repeats)]

    def work(start: int) -> int:
        total = 0
        for index in picks[start : start + READS]:
            entry = table[index]
            total += entry["k3"] + entry["k5"]
        return total

    print(f"{READS} dict reads per work item, {args.repeats} items per row")
    for gap in (0.0, 0.0002, 0.001, 0.005):
        busy = 0.0
        before = os.times()
        for repeat in range(args.repeats):
            if gap:
                select.select([], [], [], gap)
            started = time.perf_counter()
            work(repeat * READS)
            busy += time.perf_counter() - started
        after = os.times()
        user = (after.user - before.user) / args.repeats * 1e6
        system = (after.system - before.system) / args.repeats * 1e6
        print(
            f"idle gap {gap * 1e3:5.1f} ms: work item {busy / args.repeats * 1e6:6.2f} us;"
            f" process CPU per item: user {user:6.1f} us, system {system:5.1f} us"
        )


if __name__ == "__main__":
    main()
