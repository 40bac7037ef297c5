"""`mqttq bench`: a load generator that measures any MQTT 3.1.1 / 5.0 broker.

Scenarios (`scenarios.py`) say who publishes where and who must receive what; workers
(`workers.py`, `runner.py`) drive the clients (`client.py`) in one or more processes;
payloads carry a send timestamp and a per-publisher sequence number (`payload.py`) so the
subscribers can account latency, loss, duplicates and ordering (`stats.py`, `results.py`).
"""

from __future__ import annotations

import os
from typing import Any

from mqttq.bench.options import BenchError, BenchOptions, BenchUsageError
from mqttq.bench.results import merge
from mqttq.bench.scenarios import Plan
from mqttq.bench.workers import ProgressCallback, Snapshot, run_bench

__all__ = ["BenchError", "BenchOptions", "BenchUsageError", "Plan", "Snapshot", "run_plan"]


def run_plan(
    plan: Plan, options: BenchOptions, progress: ProgressCallback | None = None
) -> dict[str, Any]:
    """Run `plan` against the broker in `options`; return the JSON-ready result.

    Raises BenchUsageError when the options are invalid, BenchError (one line, for the
    user) when a worker could not go on (broker unreachable, connection refused,
    subscription refused...).
    """
    options.validate()
    busy = _machine_load()
    workers, timeline = run_bench(plan, options, progress)
    for worker in workers:
        if worker.fatal:
            raise BenchError(worker.fatal)
    result = merge(plan, options, workers, timeline)
    busy = max(busy, _machine_load())
    cores = os.cpu_count() or 1
    if busy > cores:
        result["warnings"].append(
            f"the machine was busy (load average {busy:.1f} on {cores} cores): "
            "broker and tool competed for CPU with other processes"
        )
    return result


def _machine_load() -> float:
    """The 1-minute load average, or 0 where the platform has none."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0
