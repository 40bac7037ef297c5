"""mosquitto vs mqttq, side by side, in one run on this machine (a benchmark, not a test).

For every scenario each broker is started fresh in its own temporary directory and pinned
to one core (`taskset -c 0`); `mqttq bench` drives it from the other core (`taskset -c 1`)
with exactly the same client options. Broker CPU seconds come from /proc/<pid>/stat
(utime + stime, all threads) read just before and just after the bench process. The
results table, the targets (mqttq / mosquitto ratios) and the machine are written between
the `compare.py` markers of docs/benchmarks.md.

    python benchmarks/peers/compare.py                       # 15 s per scenario, about 5 minutes
    python benchmarks/peers/compare.py --quick               # smoke check, about 1.5 minutes
    python benchmarks/peers/compare.py --only p2p-qos1 --duration 30 --json
    python benchmarks/peers/compare.py --redis-url redis://127.0.0.1:6379/0   # adds mqttq-redis
    python benchmarks/peers/compare.py --only p2p-qos1-1k --control   # adds mosquitto-again
    python benchmarks/peers/compare.py --only p2p-qos1-1k --control --interleave 5

`--control` runs Mosquitto a second time after mqttq in every scenario and reports it as
one more variant against the first Mosquitto run: the host's own spread between two runs of
the same broker (an A/A test). A control ratio beyond a target's limit means that run's
noise alone is larger than the target's margin. `--interleave K` starts the run's brokers
together and measures each timed scenario in K segments per broker, taking turns, so that
the brokers sample the same stretch of the host's noise (`segments.py` merges a broker's
segments into one record).

Everything listens on 127.0.0.1 only; every process started here is stopped (its whole
process group) before the script exits, also on Ctrl-C or SIGTERM.
`harness/brokers.py` starts and stops the brokers, `harness/scenarios.py` holds the
scenarios and runs one bench, `compare_report.py` evaluates the targets and renders the
Markdown, and `harness/page.py` writes it into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `benchmarks`

from benchmarks.harness.brokers import (
    INFLIGHT,
    MOSQUITTO,
    BrokerProcess,
    RunFailed,
    cores,
    install_sigterm_handler,
    mosquitto_config,
    pinned,
    redis_config,
    start_mosquitto,
    start_mqttq,
    stop_all,
    stop_broker,
)
from benchmarks.harness.page import DOCS, load_average, machine_info, write_section
from benchmarks.harness.scenarios import (
    PAYLOAD,
    SCENARIOS,
    Scenario,
    Timing,
    bench_argv,
    run_bench,
)
from benchmarks.peers import segments
from benchmarks.peers.compare_report import evaluate_targets, render, summary

CONTROL = "mosquitto-again"
"""The broker name of `--control`'s second Mosquitto run."""
BUSY_LOAD = 0.5
"""A 1-minute load average above this at start marks the run preliminary."""


def start_broker(
    name: str, workdir: Path, core: str | None, timing: Timing, redis_toml: str | None
) -> BrokerProcess:
    """A fresh broker of kind `name` (mosquitto, its control, mqttq or mqttq-redis)."""
    if name in ("mosquitto", CONTROL):
        return start_mosquitto(workdir, core=core, inflight=timing.inflight)
    return start_mqttq(
        workdir,
        core=core,
        name=name,
        config_toml=redis_toml if name == "mqttq-redis" else None,
    )


def run_one(
    scenario: Scenario, broker_name: str, timing: Timing, workdir: Path, redis_toml: str | None
) -> dict[str, Any]:
    """Start a fresh broker, run the scenario against it, stop it; return the run record."""
    broker_core, tool_core = cores()
    record: dict[str, Any] = {"scenario": scenario.name, "broker": broker_name, "error": None}
    broker: BrokerProcess | None = None
    try:
        broker = start_broker(broker_name, workdir, broker_core, timing, redis_toml)
        argv = pinned(tool_core, bench_argv(scenario, timing, broker.port))
        budget = timing.warmup + timing.duration + 2 * timing.drain_timeout + 120
        cpu_before, on_cpu_before = broker.cpu_seconds(), broker.on_cpu_seconds()
        record["bench"] = run_bench(argv, budget)
        record["broker_cpu_s"] = round(broker.cpu_seconds() - cpu_before, 3)
        record["broker_on_cpu_s"] = round(broker.on_cpu_seconds() - on_cpu_before, 4)
        record["broker_max_rss_mib"] = round(broker.status_bytes("VmHWM") / 2**20, 1)
        if not broker.alive:
            raise RunFailed(f"{broker_name} exited during the run: {broker.log_tail()}")
    except RunFailed as exc:
        record["error"] = str(exc)
        if broker is not None and broker.log_tail():
            record["error"] += f" (broker log: {broker.log_tail()})"
    finally:
        if broker is not None:
            stop_broker(broker)
    return record


def run_interleaved(
    scenario: Scenario,
    names: list[str],
    timing: Timing,
    workdir: Path,
    redis_toml: str | None,
    *,
    rounds: int,
) -> list[dict[str, Any]]:
    """Every broker of `names` started at once (all idle but the one driven), then measured
    in `rounds` segments of duration / rounds each, taking turns (the order rotates every
    round); one record per broker, its segments merged (`segments.merge`)."""
    broker_core, tool_core = cores()
    segment = dataclasses.replace(timing, duration=timing.duration / rounds)
    budget = segment.warmup + segment.duration + 2 * segment.drain_timeout + 120
    records: dict[str, dict[str, Any]] = {
        name: {"scenario": scenario.name, "broker": name, "error": None, "broker_cpu_s": 0.0,
               "broker_on_cpu_s": 0.0}
        for name in names
    }  # fmt: skip
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    brokers: dict[str, BrokerProcess] = {}
    try:
        for name in names:
            try:
                brokers[name] = start_broker(name, workdir / name, broker_core, timing, redis_toml)
            except RunFailed as exc:
                records[name]["error"] = str(exc)
        for k in range(rounds):
            for name in names[k % len(names) :] + names[: k % len(names)]:
                broker, record = brokers.get(name), records[name]
                if broker is None or record["error"]:
                    continue
                argv = pinned(tool_core, bench_argv(scenario, segment, broker.port))
                cpu_before, on_cpu_before = broker.cpu_seconds(), broker.on_cpu_seconds()
                try:
                    results[name].append(run_bench(argv, budget))
                    if not broker.alive:
                        raise RunFailed(f"{name} exited during the run: {broker.log_tail()}")
                except RunFailed as exc:
                    record["error"] = str(exc)
                    continue
                record["broker_cpu_s"] += broker.cpu_seconds() - cpu_before
                record["broker_on_cpu_s"] += broker.on_cpu_seconds() - on_cpu_before
        for name, broker in brokers.items():
            record = records[name]
            record["broker_cpu_s"] = round(record["broker_cpu_s"], 3)
            record["broker_on_cpu_s"] = round(record["broker_on_cpu_s"], 4)
            if not record["error"]:
                record["bench"] = segments.merge(results[name])
                record["broker_max_rss_mib"] = round(broker.status_bytes("VmHWM") / 2**20, 1)
    finally:
        for broker in brokers.values():
            stop_broker(broker)
    return list(records.values())


# --- main -----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--duration", type=float, default=15.0, help="measured s per scenario")
    parser.add_argument("--quick", action="store_true", help="3 s runs: a smoke check")
    parser.add_argument(
        "--only",
        action="append",
        choices=[s.name for s in SCENARIOS],
        help="run only this scenario (repeatable)",
    )
    parser.add_argument(
        "--inflight",
        type=int,
        default=INFLIGHT,
        help="publisher window, both brokers (mosquitto max_inflight_messages)",
    )
    parser.add_argument("--redis-url", help='also run mqttq with [storage] device = "redis"')
    parser.add_argument(
        "--control",
        action="store_true",
        help=f"run mosquitto again after mqttq and report it as variant {CONTROL} (A/A)",
    )
    parser.add_argument(
        "--interleave",
        type=int,
        default=1,
        metavar="K",
        help="start the run's brokers together and measure each in K segments of "
        "duration / K, taking turns (timed scenarios)",
    )
    parser.add_argument(
        "--output", default=str(DOCS), help="Markdown file to update ('' = do not write)"
    )
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    args = parser.parse_args(argv)
    if args.interleave < 1:
        parser.error(f"--interleave must be at least 1, got {args.interleave}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; exit status 0 when every run completed, 1 otherwise."""
    args = parse_args(argv)
    install_sigterm_handler()
    load_start = load_average()
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    timing = Timing(
        duration=3.0 if args.quick and args.duration == 15.0 else args.duration,
        warmup=0.5 if args.quick else 2.0,
        drain_timeout=5.0 if args.quick else 10.0,
        inflight=args.inflight,
    )
    brokers = ["mosquitto", "mqttq"]
    notes: list[str] = []
    redis_toml = redis_config(args.redis_url) if args.redis_url else None
    if redis_toml is not None:
        brokers.append("mqttq-redis")
    elif args.redis_url:
        notes.append('--redis-url skipped: this mqttq has no [storage] device = "redis" yet')
        _log(notes[-1])
    if args.interleave > 1:
        notes.append(
            f"--interleave {args.interleave}: in the timed scenarios all brokers ran at once "
            f"(each idle unless driven) and each was measured in {args.interleave} segments "
            f"of {timing.duration / args.interleave:g} s, taking turns in a rotating order; "
            "each row merges its broker's segments (latency histograms added up)"
        )
        _log(notes[-1])
    if args.control:
        brokers.append(CONTROL)
        notes.append(
            f"{CONTROL} is Mosquitto run again after mqttq (--control): its rows are the "
            "spread between two runs of one broker on this host, not a target"
        )
    scenarios = [s for s in SCENARIOS if not args.only or s.name in args.only]
    records: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="mqttq-compare-") as tmp:
            for scenario in scenarios:
                if args.interleave > 1 and scenario.timed:
                    _log(f"{scenario.name} / {', '.join(brokers)}: {args.interleave} rounds ...")
                    workdir = Path(tmp) / scenario.name
                    batch = run_interleaved(
                        scenario, brokers, timing, workdir, redis_toml, rounds=args.interleave
                    )
                    for record in batch:
                        _log(f"  {record['broker']}: " + (record["error"] or summary(record)))
                    records.extend(batch)
                    continue
                for name in brokers:
                    _log(f"{scenario.name} / {name} ...")
                    workdir = Path(tmp) / f"{scenario.name}-{name}"
                    record = run_one(scenario, name, timing, workdir, redis_toml)
                    records.append(record)
                    _log("  " + (record["error"] or summary(record)))
    finally:
        stop_all()
    command = ["python", "benchmarks/peers/compare.py", *(sys.argv[1:] if argv is None else argv)]
    report: dict[str, Any] = {
        "date": started,
        "command": shlex.join(command),
        "quick": args.quick,
        "machine": machine_info(),
        "load_start": load_start,
        "load_end": load_average(),
        "preliminary": args.quick or float(load_start.split()[0]) > BUSY_LOAD,
        "pinning": _pinning(),
        "timing": dataclasses.asdict(timing),
        "runs": records,
        "targets": [t for v in brokers[1:] for t in evaluate_targets(records, v, SCENARIOS)],
        "notes": notes,
        "commands": _commands(scenarios, timing, redis_toml is not None, args.interleave),
        "mosquitto_conf": mosquitto_config("PORT", "TMP", inflight=timing.inflight),
    }
    if args.output:
        write_section(Path(args.output), "compare.py", render(report, SCENARIOS, PAYLOAD))
        _log(f"wrote {args.output}")
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    for t in report["targets"]:
        _log(f"{t['variant']}: {t['target']}: {t['status']}")
    return 1 if any(r["error"] for r in records) else 0


def _pinning() -> str:
    broker_core, tool_core = cores()
    if broker_core is None:
        return "none (fewer than 2 usable cores, or no taskset)"
    return f"brokers `taskset -c {broker_core}`, bench `taskset -c {tool_core}`"


def _commands(scenarios: list[Scenario], timing: Timing, redis: bool, interleave: int) -> list[str]:
    """The command lines of the run; with `interleave`, a timed scenario's bench command is
    that of one segment."""
    broker_core, tool_core = cores()
    serve = "python -m mqttq serve --port 0 --host 127.0.0.1 --data-dir TMP/data"
    serve += " --ready-file TMP/ready.json"
    lines = [
        shlex.join(pinned(broker_core, [MOSQUITTO, "-c", "TMP/mosquitto.conf"])),
        " ".join(pinned(broker_core, [serve])),
    ]
    if redis:
        lines.append(" ".join(pinned(broker_core, [serve + " --config TMP/mqttq.toml"])))
    segment = dataclasses.replace(timing, duration=timing.duration / interleave)
    for s in scenarios:
        argv = bench_argv(s, segment if s.timed else timing, "PORT")
        lines.append(shlex.join(pinned(tool_core, ["python", *argv[1:]])))
    return lines


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # everything started was stopped on the way out
        sys.exit(130)
