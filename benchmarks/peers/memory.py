"""Broker memory: bytes per idle connection and per queued message, mqttq vs mosquitto.

A benchmark, not a test. Each measurement starts a fresh broker (pinned like compare.py,
by the helpers of harness/brokers.py):

1. Idle connections: RSS (VmRSS) of the idle broker; then N MQTT 5 clients (clean start,
   keep alive 60 s, no subscription) connect from several client processes and stay idle;
   RSS again once they are all connected and 2 s have passed. The difference over N is the
   cost of one idle connection.
2. Queued messages: one persistent session (Session Expiry 1 h) subscribes to a topic at
   QoS 1 and goes offline; RSS (and, for mqttq, the size of its SQLite files) is measured;
   a publisher sends M QoS 1 messages of 64 bytes and waits for every PUBACK; measured
   again. The difference over M is the cost of one queued message. The session then
   reconnects and drains its queue, which checks that all M were really kept. mosquitto
   writes its persistence file only at autosave and shutdown, so it is stopped (file size
   recorded) and restarted from that file before the drain.

The results are written between the `memory.py` markers of docs/benchmarks.md.

    python benchmarks/peers/memory.py                     # 10,000 connections, 10,000 messages
    python benchmarks/peers/memory.py --connections 2000 --messages 2000 --output ''
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import multiprocessing
import os
import resource
import secrets
import shlex
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `benchmarks`

from benchmarks.harness.brokers import (
    HOST,
    SQLITE_FILES,
    BrokerProcess,
    RunFailed,
    cores,
    install_sigterm_handler,
    start_mosquitto,
    start_mqttq,
    stop_all,
)
from benchmarks.harness.page import DOCS, load_average, machine_info, write_section
from mqttq.bench.client import BenchClient, Counters
from mqttq.bench.options import BenchError
from mqttq.bench.payload import PayloadBuilder, unpack_header

PAYLOAD = 64
TOPIC = "mqttq-memory/queue"
SESSION_EXPIRY = 3600
SETTLE_S = 2.0
"""Pause before reading RSS, so that allocations still in progress have finished."""
CONNECT_CONCURRENCY = 50
KEEP_ALIVE = 60


def _rss(broker: BrokerProcess) -> int:
    time.sleep(SETTLE_S)
    return broker.status_bytes("VmRSS")


def _files(broker: BrokerProcess) -> dict[str, int]:
    """Sizes of the broker's files on disk: mqttq's SQLite database, WAL and shared-memory
    file, or mosquitto's persistence file."""
    folders = (broker.workdir, broker.workdir / "data")
    return {
        name: (folder / name).stat().st_size
        for folder in folders
        for name in (*SQLITE_FILES, "mosquitto.db")
        if (folder / name).exists()
    }


def _start(name: str, workdir: Path, queue_limit: int) -> BrokerProcess:
    core = cores()[0]
    if name == "mosquitto":
        return start_mosquitto(workdir, core=core, queue_limit=queue_limit)
    env = {"MQTTQ_MQTT__MAX_QUEUED_MESSAGES": str(queue_limit)}
    return start_mqttq(workdir, core=core, settings_env=env)


# --- idle connections -----------------------------------------------------------------------


def _raise_nofile(needed: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < needed:
        raise RunFailed(f"RLIMIT_NOFILE hard limit {hard} < {needed} descriptors needed")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def hold_connections(
    port: int, prefix: str, count: int, core: str | None, pipe: Connection
) -> None:
    """Client process: open `count` idle connections, report, hold them until told to stop."""
    if core is not None:
        os.sched_setaffinity(0, {int(core)})
    _raise_nofile(count + 64)
    asyncio.run(_hold(port, prefix, count, pipe))


async def _hold(port: int, prefix: str, count: int, pipe: Connection) -> None:
    counters = Counters()
    clients: list[BenchClient] = []
    errors: list[str] = []
    limit = asyncio.Semaphore(CONNECT_CONCURRENCY)

    async def connect(index: int) -> None:
        client = BenchClient(f"{prefix}{index}", 5, counters)
        async with limit:
            try:
                await client.connect(HOST, port, keep_alive=KEEP_ALIVE, timeout=60)
            except BenchError as exc:
                errors.append(str(exc))
                return
        clients.append(client)

    await asyncio.gather(*(connect(i) for i in range(count)))
    pipe.send((len(clients), errors[:1]))
    loop = asyncio.get_running_loop()
    stop = loop.run_in_executor(None, pipe.recv)
    while not stop.done():
        # PINGREQ keeps the sessions alive while the parent measures [MQTT-3.1.2-22].
        await asyncio.wait({stop}, timeout=KEEP_ALIVE / 2)
        for client in clients:
            client.ping()
    alive = sum(1 for c in clients if c.connected)
    for client in clients:
        client.abort()
    pipe.send(alive)


def measure_connections(
    name: str, workdir: Path, connections: int, processes: int
) -> dict[str, Any]:
    """RSS before and after `connections` idle clients connect to a fresh broker."""
    _raise_nofile(connections + 256)
    broker = _start(name, workdir, queue_limit=10_000)
    context = multiprocessing.get_context("spawn")
    children: list[tuple[multiprocessing.process.BaseProcess, Connection]] = []
    try:
        before = _rss(broker)
        share, extra = divmod(connections, processes)
        tool_core = cores()[1]
        for number in range(processes):
            parent_end, child_end = context.Pipe()
            count = share + (1 if number < extra else 0)
            child = context.Process(
                target=hold_connections,
                args=(broker.port, f"mem{os.getpid()}p{number}c", count, tool_core, child_end),
                daemon=True,
            )
            child.start()
            children.append((child, parent_end))
        started = time.monotonic()
        opened, errors = 0, []
        for _, pipe in children:
            if not pipe.poll(600):
                raise RunFailed(f"{name}: a client process did not finish connecting in 600 s")
            count, first_error = pipe.recv()
            opened += count
            errors += first_error
        connect_s = time.monotonic() - started
        after = _rss(broker)
        for _, pipe in children:
            pipe.send("stop")
        still = sum(pipe.recv() if pipe.poll(60) else 0 for _, pipe in children)
        if not broker.alive:
            raise RunFailed(f"{name} exited: {broker.log_tail()}")
        return {
            "connections": opened,
            "failed": connections - opened,
            "first_error": errors[0] if errors else None,
            "still_connected_at_end": still,
            "connect_s": round(connect_s, 1),
            "rss_before": before,
            "rss_after": after,
            "bytes_per_connection": round((after - before) / opened) if opened else None,
        }
    finally:
        for process, _ in children:
            process.join(10)
            if process.is_alive():
                process.kill()
                process.join()
        broker.stop()


# --- queued messages ------------------------------------------------------------------------


async def _subscribe_offline(port: int, client_id: str) -> None:
    client = BenchClient(client_id, 5, Counters())
    # Clean Start 0 on a never-used id also creates a new session [MQTT-3.1.2-5]; and
    # mosquitto 2.0 writes only Clean Start 0 sessions to its persistence file.
    await client.connect(HOST, port, clean_start=False, session_expiry=SESSION_EXPIRY)
    await client.subscribe([(TOPIC, 1)])
    await client.disconnect()


async def _publish(port: int, client_id: str, messages: int) -> int:
    client = BenchClient(client_id, 5, Counters(), window=100)
    await client.connect(HOST, port)
    builder = PayloadBuilder(0, PAYLOAD)
    for sequence in range(messages):
        if client.window_full:
            client.flush()
            await client.wait_window(60)
        client.publish(TOPIC, builder.build(sequence, time.time_ns()), 1)
    client.flush()
    if not await client.wait_inflight_empty(120):
        raise RunFailed(f"{client.inflight} of {messages} publishes left unacknowledged")
    await client.disconnect()
    return client.acked


async def _drain(port: int, client_id: str, messages: int) -> tuple[bool, int]:
    """Reconnect the session and count the distinct messages it receives; then discard it."""
    seen: set[int] = set()
    done = asyncio.get_running_loop().create_future()

    def on_payload(payload: bytes) -> None:
        header = unpack_header(payload)
        if header is not None:
            seen.add(header[2])
            if len(seen) >= messages and not done.done():
                done.set_result(None)

    client = BenchClient(client_id, 5, Counters(), on_payload=on_payload)
    connack = await client.connect(HOST, port, clean_start=False, session_expiry=SESSION_EXPIRY)
    previous = -1
    while not done.done() and len(seen) > previous:  # stop when 10 s bring nothing new
        previous = len(seen)
        await asyncio.wait({done}, timeout=10)
    # Session Expiry 0 on DISCONNECT discards the session [MQTT-3.14.2.2.2].
    await client.disconnect(session_expiry=0)
    return connack.session_present, len(seen)


def measure_queue(name: str, workdir: Path, messages: int) -> dict[str, Any]:
    """RSS and disk before and after `messages` QoS 1 messages queue for an offline session."""
    queue_limit = max(10_000, messages)
    broker = _start(name, workdir, queue_limit)
    subscriber = f"memsub{os.getpid()}{secrets.token_hex(3)}"
    try:
        asyncio.run(_subscribe_offline(broker.port, subscriber))
        before, files_before = _rss(broker), _files(broker)
        acked = asyncio.run(_publish(broker.port, f"mempub{os.getpid()}", messages))
        after, files_after = _rss(broker), _files(broker)
        if name == "mosquitto":
            broker.stop()  # writes mosquitto.db with the queued messages
            files_after = _files(broker)
            broker = _start(name, workdir, queue_limit)
        disk_before, disk_after = sum(files_before.values()), sum(files_after.values())
        present, drained = asyncio.run(_drain(broker.port, subscriber, messages))
        return {
            "messages": messages,
            "acked": acked,
            "rss_before": before,
            "rss_after": after,
            "bytes_per_message_rss": round((after - before) / messages),
            "files_before": files_before,
            "files_after": files_after,
            "disk_before": disk_before,
            "disk_after": disk_after,
            "bytes_per_message_disk": round((disk_after - disk_before) / messages),
            "disk_note": "mosquitto.db after stop" if name == "mosquitto" else "live",
            "session_present": present,
            "drained": drained,
        }
    except BenchError as exc:
        raise RunFailed(f"{name}: {exc}") from None
    finally:
        broker.stop()


# --- report ---------------------------------------------------------------------------------


def _mib(value: int) -> str:
    return f"{value / 2**20:,.1f}"


def render(report: dict[str, Any]) -> str:
    """The Markdown section for docs/benchmarks.md."""
    out = [f"### Memory run of {report['date']}\n"]
    if report["preliminary"]:
        out.append(
            f"> **Preliminary.** Load average at start {report['load_start']}: other work "
            "shared the machine. RSS figures are less sensitive to load than rates, but "
            "re-run on an idle machine before quoting them.\n"
        )
    machine = report["machine"]
    out.append(
        f"Command: `{report['command']}`. Machine: {machine['nproc']} x {machine['cpu']}, "
        f"{machine['memory']}, {machine['kernel']}, {machine['python']}, "
        f"{machine['mosquitto']}, mqttq {machine['mqttq']}; "
        + ("broker pinned to one core, clients on the other; " if cores()[0] else "")
        + f"load average at end {report['load_end']}.\n"
    )
    out.append(
        "| broker | idle connections | RSS before MiB | RSS after MiB | bytes / idle connection "
        "| connect s |"
    )
    out.append("|---|---:|---:|---:|---:|---:|")
    for name, r in report["connections"].items():
        if "error" in r:
            out.append(f"| {name} | failed: {r['error']} | | | | |")
            continue
        failed = f" ({r['failed']:,} failed)" if r["failed"] else ""
        out.append(
            f"| {name} | {r['connections']:,}{failed} | {_mib(r['rss_before'])} | "
            f"{_mib(r['rss_after'])} | **{r['bytes_per_connection']:,}** | {r['connect_s']} |"
        )
    out.append(
        "\n| broker | queued QoS 1 messages (64 B payload) | RSS before MiB | RSS after MiB | "
        "bytes / message (RSS) | disk growth MiB | bytes / message (disk) | drained after |"
    )
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in report["queue"].items():
        if "error" in r:
            out.append(f"| {name} | failed: {r['error']} | | | | | | |")
            continue
        out.append(
            f"| {name} | {r['messages']:,} | {_mib(r['rss_before'])} | {_mib(r['rss_after'])} | "
            f"**{r['bytes_per_message_rss']:,}** | "
            f"{_mib(r['disk_after'] - r['disk_before'])} ({r['disk_note']}) | "
            f"{r['bytes_per_message_disk']:,} | {r['drained']:,} |"
        )
    for name, r in report["queue"].items():
        if "files_after" in r:
            sizes = ", ".join(f"`{f}` {_mib(n)} MiB" for f, n in r["files_after"].items())
            out.append(f"\nFiles of {name} with the queue full: {sizes or 'none'}.")
    out.append(
        "\nRSS is the broker's VmRSS from /proc, read 2 s after the last client connected or "
        "the last PUBACK. *drained after*: distinct messages the session received when it "
        "reconnected (it must equal the number queued). mqttq's disk figure is its SQLite "
        "database + WAL + shared-memory file while running; mosquitto keeps its queue in "
        "memory and writes `mosquitto.db` only at autosave or shutdown, so its figure is that "
        "file after a clean stop."
    )
    return "\n".join(out) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--processes", type=int, default=4, help="client processes")
    parser.add_argument(
        "--only", choices=["mqttq", "mosquitto"], help="measure one broker (default both)"
    )
    parser.add_argument(
        "--output", default=str(DOCS), help="Markdown file to update ('' = do not write)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Measure both brokers; exit status 0 when every measurement completed, 1 otherwise."""
    args = parse_args(argv)
    install_sigterm_handler()
    load_start = load_average()
    command = ["python", "benchmarks/peers/memory.py", *(sys.argv[1:] if argv is None else argv)]
    report: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join(command),
        "load_start": load_start,
        "preliminary": float(load_start.split()[0]) > 0.5,
        "connections": {},
        "queue": {},
    }
    brokers = [args.only] if args.only else ["mqttq", "mosquitto"]
    try:
        with tempfile.TemporaryDirectory(prefix="mqttq-memory-") as tmp:
            for name in brokers:
                for kind in ("connections", "queue"):
                    _log(f"{name}: {kind} ...")
                    workdir = Path(tmp) / f"{name}-{kind}"
                    try:
                        if kind == "connections":
                            result = measure_connections(
                                name, workdir, args.connections, args.processes
                            )
                        else:
                            result = measure_queue(name, workdir, args.messages)
                    except RunFailed as exc:
                        result = {"error": str(exc)}
                    report[kind][name] = result
                    _log(f"  {json.dumps(result)}")
    finally:
        stop_all()
    report["machine"] = machine_info()
    report["load_end"] = load_average()
    if args.output:
        write_section(Path(args.output), "memory.py", render(report))
        _log(f"wrote {args.output}")
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    failed = any("error" in r for kind in ("connections", "queue") for r in report[kind].values())
    return 1 if failed else 0


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # everything started was stopped on the way out
        sys.exit(130)
