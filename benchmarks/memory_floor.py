"""The transport's share of an idle connection: RSS per connection of an empty server.

A benchmark, not a test. A `create_server` whose Protocol keeps only its transport (one
slot) and does nothing, on uvloop or plain asyncio; a forked client opens N TCP
connections and holds them; the server's VmRSS before and after, over N, is what the
event loop's transport, its libuv handle and the loop's own bookkeeping cost per
connection, before the broker keeps anything (compare with `memory.py`).

    python benchmarks/memory_floor.py --connections 10000 --loop uvloop
    python benchmarks/memory_floor.py --connections 10000 --loop asyncio
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import signal
import socket
import time

import uvloop

HOST = "127.0.0.1"


class IdleProtocol(asyncio.Protocol):
    """Keeps its transport and nothing else."""

    __slots__ = ("transport",)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        pass


def _rss() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _hold(port: int, count: int, ready: int) -> None:
    """Child: open `count` connections, say so, then sleep until killed."""
    held = [socket.create_connection((HOST, port)) for _ in range(count)]
    os.write(ready, b"x")
    time.sleep(600)
    del held


async def measure(count: int) -> float:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(IdleProtocol, HOST, 0)
    port = server.sockets[0].getsockname()[1]
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        _hold(port, count, write_end)
        os._exit(0)
    try:
        await asyncio.sleep(0.5)
        before = _rss()
        await loop.run_in_executor(None, os.read, read_end, 1)
        await asyncio.sleep(2)  # let the last accepts finish
        return (_rss() - before) / count
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    args = parser.parse_args()
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    runner = uvloop.run if args.loop == "uvloop" else asyncio.run
    per = runner(measure(args.connections))
    print(f"{args.loop}: {per:,.0f} B of RSS per idle connection ({args.connections:,})")


if __name__ == "__main__":
    main()
