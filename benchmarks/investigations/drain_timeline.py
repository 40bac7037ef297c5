"""A backlog drain against the moment its fan-out reached the broker's loop (a script, not a
test).

The `persistent-qos1` scenario of `compare.py` (1 publisher, 100 offline persistent
sessions x 100 QoS 1 messages, broker and load tool each on one core), run against a fresh
mqttq on the embedded store each time. The publish inbox acknowledges the publisher once
its rows are durable, and queues the 10,000 entries after; the load tool starts the
reconnects once it has every PUBACK. So a fan-out still being written when they begin
is part of the drain (docs/benchmarks.md, issue 14 sections 12 and 13). Per run this prints:

- the drain rate, as `mqttq bench` reports it;
- the fan-out's queue writes (`SqliteStorage.enqueue_logged` calls: entries each);
- when the last of them reached the loop (its commit returned), in ms after the reconnects
  began: negative when the backlog was all queued before;
- when the last inbox append returned (the publisher's last PUBACKs follow it at once), in
  ms from the reconnects (negative: before them). The tool's controller polls its workers
  every 10 ms, so the reconnects begin 0-10 ms after the last PUBACK, whichever broker;
- when the first reconnect read its queue (`SqliteStorage.fetch`), in ms from the
  reconnects, and in ms after the last fan-out write reached the loop (the loop's hops
  between that commit and the waiting reconnects).

The broker runs through this script (`--record FILE serve ...`), which times those calls
on the loop and then runs mqttq's CLI: the broker's code is not changed.

    python benchmarks/investigations/drain_timeline.py --runs 12
    python benchmarks/investigations/drain_timeline.py --runs 12 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `benchmarks`

from benchmarks.harness.brokers import (
    RunFailed,
    cores,
    install_sigterm_handler,
    pinned,
    start_mqttq,
    stop_all,
    stop_broker,
)
from benchmarks.harness.scenarios import SCENARIOS, Timing, bench_argv, run_bench
from mqttq.cli import main as mqttq_main
from mqttq.storage.sqlite.store import SqliteStorage

TIMING = Timing(duration=15.0, warmup=2.0, drain_timeout=10.0, inflight=100)
"""As `compare.py` runs the persistent scenario (it is not timed: only the drain timeout
and the publisher's window apply)."""


def record_fanouts(path: Path) -> None:
    """In the broker's process, before the Hub exists: append `[kind, entries, start_ns,
    end_ns]` to `path` for every `enqueue_logged` ("fanout") and `append_inbox` ("inbox")
    call, and `[kind, 0, start_ns, start_ns]` for every `fetch` ("fetch") (wall clock, as
    the bench's drain window)."""

    def record(kind: str, entries: int, start: int, end: int) -> None:
        with path.open("a") as out:
            out.write(json.dumps([kind, entries, start, end]) + "\n")

    enqueue_logged = SqliteStorage.enqueue_logged
    append_inbox = SqliteStorage.append_inbox
    fetch = SqliteStorage.fetch

    async def timed_enqueue_logged(self: SqliteStorage, items: Any, seqs: Any) -> Any:
        start = time.time_ns()
        try:
            return await enqueue_logged(self, items, seqs)
        finally:
            record("fanout", len(items), start, time.time_ns())

    async def timed_append_inbox(self: SqliteStorage, rows: Any) -> Any:
        start = time.time_ns()
        try:
            return await append_inbox(self, rows)
        finally:
            record("inbox", len(rows), start, time.time_ns())

    async def timed_fetch(self: SqliteStorage, client_id: str, now: float) -> Any:
        start = time.time_ns()
        record("fetch", 0, start, start)
        return await fetch(self, client_id, now)

    SqliteStorage.enqueue_logged = timed_enqueue_logged  # type: ignore[method-assign]
    SqliteStorage.append_inbox = timed_append_inbox  # type: ignore[method-assign]
    SqliteStorage.fetch = timed_fetch  # type: ignore[method-assign]


def one_run(workdir: Path) -> dict[str, Any]:
    """A fresh broker, one persistent scenario, the fan-out's writes beside the drain."""
    broker_core, tool_core = cores()
    record_file = workdir / "fanouts.jsonl"
    broker = start_mqttq(
        workdir,
        core=broker_core,
        launcher=(str(Path(__file__).resolve()), "--record", str(record_file)),
    )
    try:
        scenario = next(s for s in SCENARIOS if s.name == "persistent-qos1")
        bench = run_bench(pinned(tool_core, bench_argv(scenario, TIMING, broker.port)), 120.0)
    finally:
        stop_broker(broker)
    persistent = bench["persistent"]
    started = persistent["drain_started_ns"]
    if started is None:
        raise RunFailed("the drain did not complete")
    events = [json.loads(line) for line in record_file.read_text().splitlines()]
    writes = [(n, start, end) for kind, n, start, end in events if kind == "fanout"]
    appends = [end for kind, _n, _start, end in events if kind == "inbox"]
    fetches = sorted(start for kind, _n, start, _end in events if kind == "fetch")
    if not writes or not appends or not fetches:
        raise RunFailed("the broker queued nothing through the publish inbox")
    last_end = max(end for _n, _start, end in writes)
    after = [start for start in fetches if start >= last_end]

    def ms(ns: int) -> float:
        return round(ns / 1e6, 1)

    return {
        "drain_per_s": persistent["drain_per_s"],
        "fanout_writes": [entries for entries, _start, _end in writes],
        "last_write_ms": ms(writes[-1][2] - started),
        "last_write_took_ms": ms(writes[-1][2] - writes[-1][1]),
        "last_append_ms": ms(max(appends) - started),
        "first_fetch_ms": ms(fetches[0] - started),
        "fetch_after_write_ms": round((after[0] - last_end) / 1e6, 2) if after else None,
    }


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Drain medians of the runs whose fan-out reached the loop before the reconnects began
    and of those where it came after."""
    groups: dict[str, Any] = {}
    for name, late in (("queued_before", False), ("still_queueing", True)):
        rates = [r["drain_per_s"] for r in runs if (r["last_write_ms"] > 0) == late]
        groups[name] = {
            "runs": len(rates),
            "drain_per_s_median": round(statistics.median(rates)) if rates else None,
            "drain_per_s_range": [round(min(rates)), round(max(rates))] if rates else None,
        }
    return groups


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=12, help="fresh brokers, one drain each")
    parser.add_argument("--json", action="store_true", help="print the runs as JSON")
    args = parser.parse_args(argv)
    install_sigterm_handler()
    runs: list[dict[str, Any]] = []
    try:
        for index in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="mqttq-drain-") as tmp:
                run = one_run(Path(tmp))
            runs.append(run)
            if not args.json:
                print(
                    f"run {index + 1}: drain {run['drain_per_s']:,.0f} msg/s; fan-out writes "
                    f"{run['fanout_writes']}, the last reached the loop "
                    f"{run['last_write_ms']:+.1f} ms from the reconnects "
                    f"({run['last_write_took_ms']:.1f} ms after it was called); last inbox "
                    f"append {run['last_append_ms']:+.1f} ms, first queue read "
                    f"{run['first_fetch_ms']:+.1f} ms"
                    + (
                        f" ({run['fetch_after_write_ms']:.2f} ms after the last write)"
                        if run["fetch_after_write_ms"] is not None
                        else ""
                    ),
                    flush=True,
                )
    except RunFailed as error:
        print(f"drain_timeline: {error}", file=sys.stderr)
        return 1
    finally:
        stop_all()
    groups = summary(runs)
    if args.json:
        print(json.dumps({"runs": runs, "summary": groups}, indent=2))
    else:
        for name, group in groups.items():
            print(f"{name.replace('_', ' ')}: {group}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--record":
        record_fanouts(Path(sys.argv[2]))
        sys.argv = ["mqttq", *sys.argv[3:]]
        mqttq_main()
    else:
        sys.exit(main())
