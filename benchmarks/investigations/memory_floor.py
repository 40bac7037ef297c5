"""The transport's share of an idle connection: RSS per connection of an empty server.

A benchmark, not a test. A `create_server` whose Protocol keeps only its transport (one
slot) and does nothing, on uvloop or plain asyncio; a forked client opens N TCP
connections (once the server's first VmRSS is read) and holds them; the server's VmRSS
before and after, over N, is what the event loop's transport, its libuv handle and the
loop's own bookkeeping cost per connection, before the broker keeps anything (compare
with `memory.py`).

`--mode reader` measures the other way to read a socket: no transport, the accepted
socket's descriptor registered with `loop.add_reader` and one object per connection
(one slot, the descriptor) whose bound method reads it, kept in a dict by descriptor.

    python benchmarks/investigations/memory_floor.py --connections 10000 --loop uvloop
    python benchmarks/investigations/memory_floor.py --connections 10000 --loop asyncio
    python benchmarks/investigations/memory_floor.py --connections 10000 --mode reader
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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


class IdleReader:
    """`--mode reader`: the descriptor of one accepted socket, read when readable."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def readable(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self.fd, 65536)


def _serve_readers(loop: asyncio.AbstractEventLoop, listening: socket.socket) -> None:
    """Accept on `listening` and register each new socket's descriptor with add_reader."""
    readers: dict[int, IdleReader] = {}

    def accept() -> None:
        while True:
            try:
                sock, _ = listening.accept()
            except BlockingIOError:
                return
            sock.setblocking(False)
            fd = sock.detach()
            reader = readers[fd] = IdleReader(fd)
            loop.add_reader(fd, reader.readable)

    loop.add_reader(listening.fileno(), accept)


def _hold(port: int, count: int, go: int, ready: int) -> None:
    """Child: once told to, open `count` connections, say so, then sleep until killed."""
    os.read(go, 1)
    held = [socket.create_connection((HOST, port)) for _ in range(count)]
    os.write(ready, b"x")
    time.sleep(600)
    del held


async def measure(count: int, mode: str) -> float:
    loop = asyncio.get_running_loop()
    if mode == "transport":
        server = await loop.create_server(IdleProtocol, HOST, 0)
        listening = server.sockets[0]
    else:
        listening = socket.create_server((HOST, 0), backlog=1024)
        listening.setblocking(False)
        _serve_readers(loop, listening)
    port = listening.getsockname()[1]
    read_end, write_end = os.pipe()
    go_read, go_write = os.pipe()
    child = os.fork()
    if child == 0:
        _hold(port, count, go_read, write_end)
        os._exit(0)
    try:
        await asyncio.sleep(0.5)
        before = _rss()
        os.write(go_write, b"g")  # only now: no connection is accepted before `before`
        await loop.run_in_executor(None, os.read, read_end, 1)
        await asyncio.sleep(2)  # let the last accepts finish
        return (_rss() - before) / count
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        if mode == "transport":
            server.close()
        else:
            loop.remove_reader(listening.fileno())
            listening.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--mode", choices=("transport", "reader"), default="transport")
    args = parser.parse_args()
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    runner = uvloop.run if args.loop == "uvloop" else asyncio.run
    per = runner(measure(args.connections, args.mode))
    print(
        f"{args.loop} {args.mode}: {per:,.0f} B of RSS per idle connection ({args.connections:,})"
    )


if __name__ == "__main__":
    main()
