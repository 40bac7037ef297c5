"""The least a wake-up costs a Python server on uvloop, next to a C server (a script, not a
test).

Echo servers, each on one core, answer the same client on the other core: one written
in C (`epoll_wait`, `read`, `write`; built here with the system's C compiler), one in
Python on uvloop (`add_reader`, `os.readv`, `os.write`, as mqttq's plain TCP path reads
and writes), and with `--servers` the same Python echo on the standard library's asyncio
loop or on a `select.epoll` loop of its own. The client sends one 70-byte message every
millisecond, round robin over 100 connections, and waits for each echo: at 1,000 msg/s
every message meets an idle server, as in `compare.py`'s `p2p-qos1-1k`. Per server and run
this prints its CPU per wake-up (`harness/brokers.on_cpu_seconds`: on-CPU time from schedstat, not
sampled ticks) and the client's round-trip p50 and p99.

`c+N` in `--servers` is the C echo spinning N µs between its read and its write: a server
as fast as C in everything but N µs of work per message. Its p99 next to plain `c` shows
what N µs of service time alone does to the p99 ratio on this machine.

No server does any MQTT: the difference between C and Python is what the interpreter and
its loop add to each wake-up, the floor under any per-message work in Python.

    python benchmarks/investigations/wake_floor.py --runs 6
    python benchmarks/investigations/wake_floor.py --runs 3 --servers c,uvloop,epoll,asyncio
    python benchmarks/investigations/wake_floor.py --runs 6 --servers c,c+10,c+20

docs/benchmarks.md (issue 14, section 13) quotes its output.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `benchmarks`

from benchmarks.harness.brokers import HOST, cores, on_cpu_seconds, pinned

CONNECTIONS = 100
RATE = 1000
MESSAGE = b"x" * 70

C_SERVER = r"""
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec * 1000000000L + now.tv_nsec;
}

int main(int argc, char **argv) {
    long work_ns = atol(argv[1]) * 1000;
    int ready = atoi(argv[2]), one = 1;
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {0};
    socklen_t len = sizeof addr;
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) || listen(listener, 256)) return 1;
    getsockname(listener, (struct sockaddr *)&addr, &len);
    dprintf(ready, "%d", ntohs(addr.sin_port));
    close(ready);
    int poll = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = listener}, events[64];
    epoll_ctl(poll, EPOLL_CTL_ADD, listener, &event);
    static char buffer[65536];
    for (;;) {
        int count = epoll_wait(poll, events, 64, -1);
        for (int i = 0; i < count; i++) {
            int fd = events[i].data.fd;
            if (fd == listener) {
                int client = accept(listener, 0, 0);
                setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                struct epoll_event added = {.events = EPOLLIN, .data.fd = client};
                epoll_ctl(poll, EPOLL_CTL_ADD, client, &added);
                continue;
            }
            ssize_t got = read(fd, buffer, sizeof buffer);
            if (got <= 0) {
                close(fd);
                continue;
            }
            if (work_ns) {  /* c+N only: plain c reads no clock */
                long until = now_ns() + work_ns;
                while (now_ns() < until) {
                }
            }
            if (write(fd, buffer, got) != got) return 1;
        }
    }
}
"""


def _listen(ready: int) -> socket.socket:
    """A non-blocking listener on a free port, its port written to the `ready` pipe."""
    listener = socket.socket()
    listener.bind((HOST, 0))
    listener.listen(256)
    listener.setblocking(False)
    os.write(ready, str(listener.getsockname()[1]).encode())
    os.close(ready)
    return listener


def _accepted(listener: socket.socket) -> list[socket.socket]:
    """The connections waiting on `listener`, non-blocking, Nagle off."""
    connections: list[socket.socket] = []
    while True:
        try:
            connection, _peer = listener.accept()
        except BlockingIOError:
            return connections
        connection.setblocking(False)
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connections.append(connection)


def loop_server(ready: int, use_uvloop: bool) -> None:
    """The echo on an asyncio loop (uvloop's or the standard library's) via `add_reader`."""
    buffer = bytearray(65536)
    connections: list[socket.socket] = []

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        listener = _listen(ready)

        def echo(fd: int) -> None:
            got = os.readv(fd, [buffer])
            if got == 0:
                loop.remove_reader(fd)
                return
            os.write(fd, bytes(buffer[:got]))

        def accept() -> None:
            for connection in _accepted(listener):
                connections.append(connection)
                loop.add_reader(connection.fileno(), echo, connection.fileno())

        loop.add_reader(listener.fileno(), accept)
        await asyncio.Event().wait()

    if use_uvloop:
        uvloop.run(serve())
    else:
        asyncio.run(serve())


def epoll_server(ready: int) -> None:
    """The echo on a `select.epoll` loop of its own: Python with no event loop library."""
    listener = _listen(ready)
    poller = select.epoll()
    poller.register(listener.fileno(), select.EPOLLIN)
    buffer = bytearray(65536)
    connections: dict[int, socket.socket] = {}
    while True:
        for fd, _events in poller.poll():
            if fd == listener.fileno():
                for connection in _accepted(listener):
                    connections[connection.fileno()] = connection
                    poller.register(connection.fileno(), select.EPOLLIN)
                continue
            got = os.readv(fd, [buffer])
            if got == 0:
                poller.unregister(fd)
                connections.pop(fd).close()
                continue
            os.write(fd, bytes(buffer[:got]))


PYTHON_SERVERS: dict[str, Callable[[int], None]] = {
    "uvloop": partial(loop_server, use_uvloop=True),
    "asyncio": partial(loop_server, use_uvloop=False),
    "epoll": epoll_server,
}
"""The Python servers by name (each runs in a child process: `wake_floor.py --serve NAME`)."""


def c_work_us(name: str) -> int | None:
    """The µs of work per message of a C server name (`c`: 0, `c+N`: N); None for others."""
    if name == "c":
        return 0
    prefix, _, work = name.partition("+")
    return int(work) if prefix == "c" and work.isdigit() else None


def one_run(argv: list[str], seconds: float) -> dict[str, float]:
    """Start one server (its port comes back on a pipe), drive it, stop it."""
    ready_read, ready_write = os.pipe()
    server = subprocess.Popen([*argv, str(ready_write)], pass_fds=(ready_write,))
    os.close(ready_write)
    try:
        port = int(os.read(ready_read, 16) or b"0")
        if not port:
            raise RuntimeError(f"{argv[-1]} did not start")
        connections = [socket.create_connection((HOST, port)) for _ in range(CONNECTIONS)]
        for connection in connections:
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        time.sleep(0.5)
        cpu = on_cpu_seconds(server.pid)
        round_trips: list[int] = []
        start = time.perf_counter()
        sent = 0
        while time.perf_counter() - start < seconds:
            due = start + sent / RATE
            while time.perf_counter() < due:  # the client never sleeps: only the server idles
                pass
            connection = connections[sent % CONNECTIONS]
            before = time.perf_counter_ns()
            connection.sendall(MESSAGE)
            got = 0
            while got < len(MESSAGE):
                got += len(connection.recv(len(MESSAGE) - got))
            round_trips.append(time.perf_counter_ns() - before)
            sent += 1
        cpu = on_cpu_seconds(server.pid) - cpu
        for connection in connections:
            connection.close()
    finally:
        os.close(ready_read)
        server.kill()
        server.wait()
    round_trips.sort()
    return {
        "cpu_us_per_wakeup": round(cpu / sent * 1e6, 1),
        "rtt_p50_us": round(round_trips[len(round_trips) // 2] / 1e3),
        "rtt_p99_us": round(round_trips[int(len(round_trips) * 0.99)] / 1e3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each server, alternating")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each run")
    parser.add_argument(
        "--servers",
        default="c,uvloop",
        help=f"comma-separated, run in this order: c, c+N (N µs of work per message), "
        f"{', '.join(PYTHON_SERVERS)}",
    )
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.servers.split(",") if name.strip()]
    unknown = [name for name in names if c_work_us(name) is None and name not in PYTHON_SERVERS]
    if unknown or not names:
        print(f"wake_floor: unknown server {', '.join(unknown) or '(none)'}", file=sys.stderr)
        return 2
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        print("wake_floor: no C compiler (cc or gcc) on PATH", file=sys.stderr)
        return 1
    server_core, client_core = cores()
    if client_core is not None:
        os.sched_setaffinity(0, {int(client_core)})
    with tempfile.TemporaryDirectory(prefix="mqttq-wake-") as tmp:
        source, binary = Path(tmp) / "echo.c", Path(tmp) / "echo"
        source.write_text(C_SERVER)
        subprocess.run([compiler, "-O2", "-o", str(binary), str(source)], check=True)
        servers = {
            name: pinned(
                server_core,
                [sys.executable, __file__, "--serve", name]
                if name in PYTHON_SERVERS
                else [str(binary), str(c_work_us(name))],
            )
            for name in names
        }
        results: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
        for index in range(args.runs):
            for name, command in servers.items():
                result = one_run(command, args.seconds)
                results[name].append(result)
                print(
                    f"run {index + 1} {name:7}: {result['cpu_us_per_wakeup']:5.1f} us CPU per "
                    f"wake-up; round trip p50 {result['rtt_p50_us']} us, "
                    f"p99 {result['rtt_p99_us']} us",
                    flush=True,
                )
    for name, runs in results.items():
        cpu = statistics.median(r["cpu_us_per_wakeup"] for r in runs)
        p99 = statistics.median(r["rtt_p99_us"] for r in runs)
        print(f"{name}: median {cpu:.1f} us CPU per wake-up, round trip p99 {p99:.0f} us")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        PYTHON_SERVERS[sys.argv[2]](int(sys.argv[3]))
    else:
        sys.exit(main())
