"""Integrations' throughput and their cost to the broker (issue 33, "Speed"; not a test).

The broker (`mqttq serve`, embedded mode) runs pinned to one core; the load (QoS 1
publishers, 62-byte payloads, 100 in flight each, `publish.py`: the load tool's publishers
with no subscriber) and the sink's far end (the HTTP receiver, Mosquitto and its subscriber)
run pinned to the other; Kafka is not pinned (it shares both, as in kafka_log.py). Every
integration matches every message (`filters = ["mqttq-bench/#"]`).

Scenarios (each prints one JSON result; --doc also rewrites its section of
docs/benchmarks.md, `<!-- integrations-<scenario>:begin -->`):

- `http`: an http integration with `body = "array"` to receiver.py, which counts the
  messages in each array and notes the first and last request's arrival.
- `kafka`: a kafka integration to a one-node Kafka (scripts/kafka-local.sh) whose topic
  stamps LogAppendTime; after an unmeasured warm-up, the measured records are read back
  (their count is checked against the integration's delivered counter, their timestamps
  give first and last delivery).
- `bridge`: an mqtt integration (direction out, QoS 1) to a local Mosquitto, where
  `mosquitto_sub -F %U` notes each arrival.
- (`--drain`: the integration is paused while the load publishes and resumed after, so
  that the rate is the integration's own, not bounded by how fast the broker takes
  publishes; the queue limit is raised to 65535 for it.)
- `overhead`: `mqttq bench p2p` (100 pairs QoS 1, as peers/compare.py's headline) on a
  fresh broker without, then with, one http integration (as in `http`) matching every
  message: the publish rate of each, and their ratio; with the integration, also what it
  had delivered when the load ended and its lag then (a worker that fell behind finishes
  after the measured window: its cost is then partly outside it), and the broker's CPU a
  message until everything was delivered (the cost a steady load pays).
- `backlog-memory`: the http integration's receiver down (nothing listens on its port);
  N messages published and acknowledged; broker RSS before and after; then the receiver
  starts and the backlog drains: all N delivered, and the RSS after.

"delivered msg/s" = the integration's `delivered` counter (admin API, as `mqttq
integration ls --json` prints it) divided by the time from the first to the last delivery
as the sink saw it. Broker CPU per delivered message comes from /proc (schedstat).

    python benchmarks/integrations/throughput.py http [--publishers 10] [--count 20000]
        [--batch-size 500] [--doc]
    python benchmarks/integrations/throughput.py kafka|bridge|overhead|backlog-memory ...
    python benchmarks/integrations/throughput.py all --doc

Options: `--profile FILE` (http, kafka, bridge) records the broker's stacks with py-spy
(collapsed, every thread) during the load; `--broker-env MQTTQ_KEY=VALUE` sets a broker
setting (e.g. `MQTTQ_MQTT__MAX_QUEUED_MESSAGES=65535`); `MQTTQ_PURE=1` in the environment
runs the broker from its sources (needed while the compiled build is older than them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `benchmarks`

from benchmarks.harness.brokers import (
    SQLITE_FILES,
    BrokerProcess,
    RunFailed,
    cores,
    free_port,
    install_sigterm_handler,
    on_cpu_seconds,
    pinned,
    start_mosquitto,
    start_mqttq,
    stop_all,
)
from benchmarks.harness.page import DOCS, load_average, machine_info, write_section
from benchmarks.harness.scenarios import Scenario, Timing, bench_argv, run_bench
from benchmarks.integrations import services
from benchmarks.integrations.publish import TOPIC_PREFIX

NAME = "bench"
"""The integration's name in every scenario."""
KAFKA_TOPIC = "mqttq-bench-out"
SCENARIOS = ("http", "kafka", "bridge", "overhead", "backlog-memory")


@dataclass(frozen=True, slots=True)
class Load:
    """The publish-only load: `publishers` x `count` QoS 1 messages."""

    publishers: int
    count: int
    inflight: int
    batch_size: int
    linger_ms: int
    stall: float
    """Seconds without progress of the delivered counter before the run is given up."""
    profile: Path | None = None
    """Where `py-spy record` writes the broker's collapsed stacks during a sink run."""
    drain: bool = False
    """Sink runs: the integration paused while the load publishes, resumed after; the
    delivered rate is then the integration's alone, not bounded by the publish rate."""

    @property
    def messages(self) -> int:
        return self.publishers * self.count


def integration_toml(kind: str, load: Load, **keys: object) -> str:
    """One [[integration]] table matching every bench message."""
    lines = [
        "[[integration]]",
        f'name = "{NAME}"',
        f'type = "{kind}"',
        f'filters = ["{TOPIC_PREFIX}/#"]',
        f"batch_size = {load.batch_size}",
        f"linger_ms = {load.linger_ms}",
        f"max_in_flight = {max(1000, 10 * load.batch_size)}",
        "retry_initial_ms = 100",
        "retry_max_ms = 1000",
    ]
    lines += [f"{key} = {json.dumps(value)}" for key, value in keys.items()]
    return "\n".join(lines) + "\n"


BROKER_ENV: dict[str, str] = {}
"""MQTTQ_* settings for every broker started here (--broker-env), set once by main."""


def broker_env() -> dict[str, str]:
    """MQTTQ_PURE passes through to the broker (start_mqttq drops every other MQTTQ_*),
    with the --broker-env settings."""
    pure = os.environ.get("MQTTQ_PURE")
    return {**({"MQTTQ_PURE": pure} if pure else {}), **BROKER_ENV}


def publish(broker: BrokerProcess, core: str | None, load: Load, count: int) -> dict[str, Any]:
    """Run publish.py pinned to `core`: `load.publishers` x `count` messages."""
    script = str(Path(__file__).with_name("publish.py"))
    argv = [sys.executable, script, "--port", str(broker.port)]
    argv += ["--publishers", str(load.publishers), "--count", str(count)]
    argv += ["--inflight", str(load.inflight)]
    result = run_bench(pinned(core, argv), timeout=600)
    acked = result["messages"]["acknowledged"]
    if acked != load.publishers * count:
        raise RunFailed(f"{acked} of {load.publishers * count} publishes acknowledged")
    result["command"] = " ".join(pinned(core, argv))
    return result


def delivered_rate(delivered: int, first: float, last: float) -> float | None:
    return delivered / (last - first) if last > first else None


def sink_run(
    broker: BrokerProcess,
    tool_core: str | None,
    load: Load,
    sink_times: Callable[[], tuple[int, float, float]],
) -> dict[str, Any]:
    """Publish the load, wait for every delivery; the common part of a sink's result.
    `sink_times()` gives (messages the sink has, first and last arrival) at the end."""
    admin = services.Integrations(broker)
    before = admin.status(NAME)["delivered"]
    profiler = services.Profiler(broker.pid, load.profile) if load.profile else None
    cpu0 = on_cpu_seconds(broker.pid)
    threads0 = services.thread_cpu_seconds(broker.pid)
    started = time.time()
    try:
        if load.drain:
            admin.client.pause_integration(NAME)
        load_result = publish(broker, tool_core, load, load.count)
        if load.drain:
            drain_cpu0 = on_cpu_seconds(broker.pid)
            drain_threads0 = services.thread_cpu_seconds(broker.pid)
            started = time.time()
            admin.client.resume_integration(NAME)
        # Short of all when the broker lost some (a queue over mqtt.max_queued_messages):
        # the result says how many.
        status = admin.wait(NAME, "delivered", before + load.messages, load.stall, short_ok=True)
        cpu = on_cpu_seconds(broker.pid) - cpu0
        threads = services.thread_cpu_seconds(broker.pid)
    finally:
        if profiler is not None:
            profiler.stop()
    delivered = status["delivered"] - before
    at_sink, first, last = sink_times()
    drained: dict[str, Any] = {}
    if load.drain:
        # The drain's own CPU (from the resume on): what bounds the delivered rate, without
        # the publishes taken in while the integration was paused.
        drained = {
            "drain_cpu_us_per_msg": (cpu - (drain_cpu0 - cpu0)) / max(1, delivered) * 1e6,
            "drain_threads_cpu_us_per_msg": {
                name: round((seconds - drain_threads0.get(name, 0.0)) / max(1, delivered) * 1e6, 1)
                for name, seconds in threads.items()
                if seconds - drain_threads0.get(name, 0.0) > 0.001
            },
        }
    return {
        "messages": load.messages,
        "published_per_s": load_result["rates"]["published_per_s"],
        "delivered": delivered,
        "at_sink": at_sink,
        "lost": load.messages - delivered,
        "delivered_per_s": delivered_rate(delivered, first, last),
        "first_to_last_s": last - first,
        "mode": "drain (paused while publishing)" if load.drain else "live",
        "start_to_last_s": last - started,
        "broker_cpu_us_per_msg": cpu / max(1, delivered) * 1e6,
        "broker_threads_cpu_us_per_msg": {
            name: round((seconds - threads0.get(name, 0.0)) / max(1, delivered) * 1e6, 1)
            for name, seconds in threads.items()
            if seconds - threads0.get(name, 0.0) > 0.001
        },
        **drained,
        "failed": status["failed"],
        "retried": status["retried"],
        "dead_lettered": status["dead_lettered"],
        "lag_at_end": status["lag"],
        "load_command": load_result["command"],
    }


def run_http(work: Path, load: Load) -> dict[str, Any]:
    broker_core, tool_core = cores()
    receiver = services.Receiver(tool_core)
    config = integration_toml("http", load, url=receiver.url, body="array")
    broker = start_mqttq(work, core=broker_core, config_toml=config, settings_env=broker_env())

    def at_sink() -> tuple[int, float, float]:
        stats = receiver.stats()
        return stats["messages"], stats["first"], stats["last"]

    result = sink_run(broker, tool_core, load, at_sink)
    result["duplicate_requests"] = receiver.stats()["duplicate_requests"]
    return {"scenario": "http", "target_per_s": 20_000, **result, "config": config}


def run_kafka(work: Path, load: Load, warmup_count: int) -> dict[str, Any]:
    from tests.kafka_service import KafkaServer  # noqa: PLC0415

    broker_core, tool_core = cores()
    kafka = KafkaServer(work / "kafka")
    kafka.start()
    try:
        services.create_log_append_topic(kafka.bootstrap, KAFKA_TOPIC, partitions=3)
        config = integration_toml(
            "kafka", load, bootstrap_servers=kafka.bootstrap, topic=KAFKA_TOPIC
        )
        broker = start_mqttq(
            work / "broker", core=broker_core, config_toml=config, settings_env=broker_env()
        )
        if warmup_count:
            # A JVM just started runs interpreted: unmeasured messages first.
            admin = services.Integrations(broker)
            publish(broker, tool_core, load, warmup_count)
            admin.wait(NAME, "delivered", load.publishers * warmup_count, load.stall)
        start = services.topic_end_offsets(kafka.bootstrap, KAFKA_TOPIC)

        def at_sink() -> tuple[int, float, float]:
            times = services.read_topic_times(kafka.bootstrap, KAFKA_TOPIC, start)
            return len(times), min(times, default=0.0), max(times, default=0.0)

        result = sink_run(broker, tool_core, load, at_sink)
    finally:
        stop_all()
        kafka.stop()
    result["warmup_messages"] = load.publishers * warmup_count
    return {"scenario": "kafka", "target_per_s": 50_000, **result, "config": config}


def run_bridge(work: Path, load: Load) -> dict[str, Any]:
    broker_core, tool_core = cores()
    mosquitto = start_mosquitto(work / "mosquitto", core=tool_core)
    subscriber = services.MosquittoSubscriber(tool_core, mosquitto.port, work)
    subscriber.wait_subscribed()
    config = integration_toml(
        "mqtt", load, host="127.0.0.1", port=mosquitto.port, direction="out", qos=1
    )
    broker = start_mqttq(
        work / "broker", core=broker_core, config_toml=config, settings_env=broker_env()
    )

    def at_sink() -> tuple[int, float, float]:
        deadline = time.monotonic() + 30
        times = subscriber.arrivals()
        while len(times) < load.messages and time.monotonic() < deadline:
            time.sleep(0.2)  # mosquitto_sub writes through stdio buffers
            times = subscriber.arrivals()
        return len(times), min(times, default=0.0), max(times, default=0.0)

    result = sink_run(broker, tool_core, load, at_sink)
    return {"scenario": "bridge", "target_per_s": 20_000, **result, "config": config}


def run_overhead(work: Path, load: Load, pairs: int, duration: float) -> dict[str, Any]:
    broker_core, tool_core = cores()
    scenario = Scenario("p2p-qos1", "p2p QoS 1", ("p2p", "--pairs", str(pairs)), 1)
    timing = Timing(duration, 2.0, drain_timeout=30.0, inflight=100)
    rows: dict[str, dict[str, Any]] = {}
    config = ""
    for mode in ("without", "with"):
        toml = None
        if mode == "with":
            receiver = services.Receiver(tool_core)
            toml = config = integration_toml("http", load, url=receiver.url, body="array")
        broker = start_mqttq(
            work / mode, core=broker_core, config_toml=toml, settings_env=broker_env()
        )
        argv = pinned(tool_core, bench_argv(scenario, timing, broker.port))
        cpu0 = on_cpu_seconds(broker.pid)
        result = run_bench(argv, timing.warmup + duration + 2 * timing.drain_timeout + 120)
        cpu = on_cpu_seconds(broker.pid) - cpu0
        row = {
            "published_per_s": result["rates"]["published_per_s"],
            "received_per_s": result["rates"]["received_per_s"],
            "puback_p50_ms": result["latency_ms"]["puback"]["p50"],
            "lost": result["messages"]["lost"],
            "broker_cpu_us_per_msg": cpu / max(1, result["messages"]["received"]) * 1e6,
            "command": " ".join(argv),
        }
        if mode == "with":
            # How far the integration kept up while the load ran (what it had delivered
            # when the load ended, and its lag then), then everything acknowledged must
            # reach the receiver: wait until the counter stops moving, and compare.
            acked = result["messages"]["acknowledged"]
            admin = services.Integrations(broker)
            at_end = admin.status(NAME)
            status = admin.wait(NAME, "delivered", acked, load.stall, short_ok=True)
            all_delivered_cpu = on_cpu_seconds(broker.pid) - cpu0
            row.update(
                # Everything the integration cost, also what it delivered after the load:
                # the figure a steady load pays (the window's figure leaves out the lag).
                broker_cpu_us_per_msg_until_all_delivered=all_delivered_cpu
                / max(1, status["delivered"])
                * 1e6,
                delivered_when_load_ended=at_end["delivered"],
                lag_when_load_ended=at_end["lag"],
                acknowledged=acked,
                integration_delivered=status["delivered"],
                at_receiver=receiver.stats()["messages"],
                requests_at_receiver=receiver.stats()["requests"],
                integration_lost=acked - status["delivered"],
                broker_dropped=admin.metric("mqttq_messages_dropped"),
            )
        rows[mode] = row
        stop_all()
        services.stop_all()
    ratio = rows["with"]["published_per_s"] / max(1.0, rows["without"]["published_per_s"])
    return {
        "scenario": "overhead",
        "target_ratio": 0.6,
        "ratio": ratio,
        **rows,
        "config": config,
    }


def sqlite_bytes(data_dir: Path) -> int:
    """The size of the SQLite store's files (database, WAL, shared memory)."""
    return sum(
        (data_dir / name).stat().st_size for name in SQLITE_FILES if (data_dir / name).exists()
    )


def run_backlog_memory(work: Path, load: Load) -> dict[str, Any]:
    broker_core, tool_core = cores()
    port = free_port()  # the receiver's, nothing listens there until the drain
    config = integration_toml("http", load, url=f"http://127.0.0.1:{port}/ingest", body="array")
    broker = start_mqttq(work, core=broker_core, config_toml=config, settings_env=broker_env())
    admin = services.Integrations(broker)
    rss_start = broker.status_bytes("VmRSS")
    disk_start = sqlite_bytes(work / "data")
    # Every publish acknowledged: every message is committed to the integration's queue.
    # (Not `lag`: in embedded mode it counts the entries held in memory, at most
    # max_in_flight, not what waits in storage.)
    # In two halves: memory that stays bounded grows in the first (up to max_in_flight
    # entries held) and not in the second.
    half = load.count // 2
    publish(broker, tool_core, load, half)
    rss_half = broker.status_bytes("VmRSS")
    publish(broker, tool_core, load, load.count - half)
    status = admin.status(NAME)
    rss_queued = broker.status_bytes("VmRSS")
    disk_queued = sqlite_bytes(work / "data")
    hwm_queued = broker.status_bytes("VmHWM")
    receiver = services.Receiver(tool_core, port)
    drain_start = time.time()
    # Short of all N when the broker lost some: the result says how many.
    done = admin.wait(NAME, "delivered", load.messages, load.stall, short_ok=True)
    stats = receiver.stats()
    return {
        "scenario": "backlog-memory",
        "messages": load.messages,
        "state_while_down": status["state"],
        "lag_while_down": status["lag"],
        "rss_start_mib": rss_start / 2**20,
        "rss_queued_mib": rss_queued / 2**20,
        "hwm_queued_mib": hwm_queued / 2**20,
        "rss_half_mib": rss_half / 2**20,
        "rss_growth_bytes_per_msg": (rss_queued - rss_start) / load.messages,
        "rss_growth_second_half_bytes_per_msg": (rss_queued - rss_half)
        / (load.messages - load.publishers * half),
        "sqlite_growth_bytes_per_msg": (disk_queued - disk_start) / load.messages,
        "delivered": done["delivered"],
        "at_sink": stats["messages"],
        "lost": load.messages - stats["messages"],
        "broker_dropped": admin.metric("mqttq_messages_dropped"),
        "drained_per_s": delivered_rate(done["delivered"], drain_start, stats["last"]),
        "rss_after_drain_mib": broker.status_bytes("VmRSS") / 2**20,
        "lag_at_end": done["lag"],
        "config": config,
    }


def markdown(result: dict[str, Any], command: str) -> str:
    """The docs section of one result: the command, the machine, the figures."""
    info = machine_info()
    title = {
        "http": "HTTP sink, batching on (issue 33)",
        "kafka": "Kafka sink (issue 33)",
        "bridge": "MQTT bridge out to Mosquitto, QoS 1 (issue 33)",
        "overhead": "What one matching integration costs the broker's publish rate (issue 33)",
        "backlog-memory": "Broker memory while a sink is down (issue 33)",
    }[result["scenario"]]
    lines = [
        f"### {title}",
        "",
        f"`{command}` (benchmarks/integrations/throughput.py), "
        f"{info['nproc']} cores ({info['cpu']}), {info['python']}, mqttq {info['mqttq']}, "
        f"load average before: {result['load_average']}, "
        f"{'pure Python (MQTTQ_PURE=1)' if os.environ.get('MQTTQ_PURE') else 'compiled'}.",
        "",
        "| figure | value |",
        "|---|---:|",
    ]
    for key, value in _flat(result):
        if key in ("scenario", "config", "load_average"):
            continue
        shown = f"{value:,.2f}" if isinstance(value, float) else f"{value}"
        if isinstance(value, str) and " " in value:
            shown = f"`{value}`"
        lines.append(f"| {key} | {shown} |")
    lines += ["", "The integration:", "", "```toml", result["config"].strip(), "```"]
    return "\n".join(lines)


def run_scenario(scenario: str, work: Path, load: Load, args: argparse.Namespace) -> dict[str, Any]:
    """Run one scenario in the temporary directory `work`."""
    if scenario == "http":
        return run_http(work, load)
    if scenario == "kafka":
        return run_kafka(work, load, args.kafka_warmup)
    if scenario == "bridge":
        return run_bridge(work, load)
    if scenario == "overhead":
        return run_overhead(work, load, args.pairs, args.duration)
    return run_backlog_memory(work, load)


def _flat(result: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """(key, value) of every figure; a nested object's keys as `outer.inner`."""
    items: list[tuple[str, Any]] = []
    for key, value in result.items():
        if isinstance(value, dict):
            items += _flat(value, f"{prefix}{key}.")
        else:
            items.append((f"{prefix}{key}", value))
    return items


def shown_command(argv: list[str]) -> str:
    """The command that reproduces a run, without the options that only say where its
    output goes (--doc, --doc-file, --profile)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--doc-file", "--profile"):
            skip = True
        elif arg != "--doc" and not arg.startswith(("--doc-file=", "--profile=")):
            kept.append(arg)
    return "python benchmarks/integrations/throughput.py " + " ".join(kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("scenario", choices=(*SCENARIOS, "all"))
    parser.add_argument("--publishers", type=int, default=10)
    parser.add_argument(
        "--count", type=int, default=6_000, help="messages per publisher (default fits --drain)"
    )
    parser.add_argument("--inflight", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument(
        "--stall", type=float, default=15.0, help="seconds without a delivery before giving up"
    )
    parser.add_argument("--kafka-warmup", type=int, default=2_000, help="messages per publisher")
    parser.add_argument(
        "--drain",
        action="store_true",
        help="http, kafka, bridge: pause the integration while publishing, then measure "
        "its drain (sets MQTTQ_MQTT__MAX_QUEUED_MESSAGES=65535 unless given)",
    )
    parser.add_argument("--pairs", type=int, default=100, help="overhead: p2p pairs")
    parser.add_argument("--duration", type=float, default=15.0, help="overhead: seconds")
    parser.add_argument("--doc", action="store_true", help="write the section(s) of the docs")
    parser.add_argument(
        "--broker-env",
        action="append",
        default=[],
        metavar="MQTTQ_KEY=VALUE",
        help="a setting for the broker, e.g. MQTTQ_MQTT__MAX_QUEUED_MESSAGES=65535",
    )
    parser.add_argument("--doc-file", type=Path, default=DOCS, help=argparse.SUPPRESS)
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="FILE",
        help="http, kafka, bridge: py-spy's collapsed stacks of the broker during the load",
    )
    args = parser.parse_args()
    install_sigterm_handler()
    for item in args.broker_env:
        key, sep, value = item.partition("=")
        if not sep or not key.startswith("MQTTQ_"):
            parser.error(f"--broker-env wants MQTTQ_KEY=VALUE, got {item!r}")
        BROKER_ENV[key] = value
    if args.drain:
        # The integration's session queue holds at most mqtt.max_queued_messages.
        BROKER_ENV.setdefault("MQTTQ_MQTT__MAX_QUEUED_MESSAGES", "65535")
        if args.publishers * args.count > int(BROKER_ENV["MQTTQ_MQTT__MAX_QUEUED_MESSAGES"]):
            parser.error("--drain: publishers x count must fit mqtt.max_queued_messages")
    load = Load(
        args.publishers,
        args.count,
        args.inflight,
        args.batch_size,
        args.linger_ms,
        args.stall,
        args.profile.resolve() if args.profile else None,
        args.drain,
    )
    chosen = SCENARIOS if args.scenario == "all" else (args.scenario,)
    command = shown_command(sys.argv[1:])
    failed = False
    for scenario in chosen:
        average = load_average()
        with tempfile.TemporaryDirectory(prefix=f"mqttq-integrations-{scenario}-") as tmp:
            work = Path(tmp)
            try:
                result = run_scenario(scenario, work, load, args)
            except RunFailed as exc:
                print(f"throughput: error: {scenario}: {exc}", file=sys.stderr)
                failed = True
                continue
            finally:
                stop_all()
                services.stop_all()
        result["load_average"] = average
        print(json.dumps(result, indent=2), flush=True)
        if args.doc:
            one = command.replace(f" {args.scenario}", f" {scenario}", 1)
            write_section(args.doc_file, f"integrations-{scenario}", markdown(result, one))
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
