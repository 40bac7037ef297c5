"""The dashboard sampler end to end (issue 34; a script, not a test): `mqttq serve` with
the admin API and its sampler (at `--interval` seconds, 1 by default: five times the
default rate, to make its cost visible) against `mqttq serve` with `[admin] enabled =
false` (no admin API, no sampler), on the scenarios p2p QoS 1 and fan-in QoS 0, the
variants alternated `--rounds` times. Prints throughput and the broker's on-CPU time per
message for each run.

    python -m benchmarks.micro.sampler_ab [--rounds 2] [--duration 10] [--pure]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from benchmarks.harness.brokers import start_mqttq, stop_broker
from benchmarks.harness.scenarios import SCENARIOS, Timing, bench_argv, run_bench

VARIANTS = {
    "sampler": "[admin]\nport = 0\nsample_interval = {interval}\n",
    "none": "[admin]\nenabled = false\n",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument(
        "--pure",
        action="store_true",
        help="Run the brokers from the sources (MQTTQ_PURE=1), e.g. when the compiled "
        "modules are older than their sources.",
    )
    args = parser.parse_args()
    timing = Timing(args.duration, 2.0, 10.0, 100)
    chosen = [s for s in SCENARIOS if s.name in ("p2p-qos1", "fan-in-qos0")]
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="sampler-ab-") as temp:
        for round_ in range(args.rounds):
            for scenario in chosen:
                for variant, config in VARIANTS.items():
                    workdir = Path(temp) / f"{scenario.name}-{variant}-{round_}"
                    broker = start_mqttq(
                        workdir,
                        core=None,
                        config_toml=config.format(interval=args.interval),
                        settings_env={"MQTTQ_PURE": "1"} if args.pure else None,
                    )
                    try:
                        before = broker.on_cpu_seconds()
                        result = run_bench(bench_argv(scenario, timing, broker.port), 120.0)
                        cpu = broker.on_cpu_seconds() - before
                    finally:
                        stop_broker(broker)
                    rate = float(result["rates"]["received_per_s"])
                    count = int(result["messages"]["received"])
                    per_message = cpu / max(1, count) * 1e6
                    results.setdefault((scenario.name, variant), []).append((rate, per_message))
                    print(
                        f"{scenario.name:<12} {variant:<8} round {round_}: "
                        f"{rate:>10,.0f} msg/s  {per_message:6.2f} us CPU/msg",
                        flush=True,
                    )
    print()
    for (name, variant), runs in sorted(results.items()):
        rates = [r for r, _ in runs]
        cpus = [c for _, c in runs]
        print(
            f"{name:<12} {variant:<8} median {statistics.median(rates):>10,.0f} msg/s  "
            f"{statistics.median(cpus):6.2f} us CPU/msg  (runs: {len(runs)})"
        )


if __name__ == "__main__":
    main()
