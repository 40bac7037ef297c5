"""CONNECTs per second through the http authentication provider (not a test).

Starts `mqttq serve` (its own process, `[auth] providers = ["http"]`) and an aiohttp
authentication service (a thread of this process, port 0) that allows every client, then
runs `--workers` connection loops for `--seconds`: each opens a TCP connection, sends an
MQTT 3.1.1 CONNECT with a user name and password, reads the CONNACK (return code 0
required), sends DISCONNECT and closes, cycling through `--devices` client ids of its
own. Prints CONNECTs per second and how many requests reached the service, with the
chain's cache on (`cache_ttl = 60`) and off (`cache_ttl = 0`).

    python benchmarks/auth/connect_rate.py --seconds 10 --workers 32 --devices 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import tempfile
import threading
import time
from pathlib import Path

import uvloop
from aiohttp import web

from benchmarks.harness.brokers import HOST, start_mqttq, stop_broker


class Service:
    """The authentication service: allows everyone, counts requests."""

    def __init__(self) -> None:
        self.requests = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait(10)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        ready.set()
        self._loop.run_forever()

    async def _start(self) -> None:
        async def auth(request: web.Request) -> web.Response:
            self.requests += 1
            await request.read()
            return web.json_response({"result": "allow"})

        app = web.Application()
        app.router.add_post("/auth", auth)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, HOST, 0)
        await site.start()
        self.port = runner.addresses[0][1]


def _string(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("!H", len(data)) + data


def connect_packet(client_id: str, username: str, password: bytes) -> bytes:
    body = (
        _string("MQTT")
        + bytes((4, 0xC2))
        + struct.pack("!H", 60)
        + _string(client_id)
        + _string(username)
        + _string(password)
    )
    length = len(body)
    encoded = bytearray()
    while True:
        byte, length = length % 128, length // 128
        encoded.append(byte | (0x80 if length else 0))
        if not length:
            break
    return bytes((0x10,)) + bytes(encoded) + body


async def worker(port: int, index: int, devices: int, until: float, done: list[int]) -> None:
    packets = [
        connect_packet(f"w{index}-d{d}", f"user-{index}-{d}", f"pw-{index}-{d}".encode())
        for d in range(devices)
    ]
    count = 0
    while time.monotonic() < until:
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(packets[count % devices])
        connack = await reader.readexactly(4)
        if connack[3] != 0:
            raise SystemExit(f"CONNECT refused: return code {connack[3]}")
        writer.write(b"\xe0\x00")
        writer.close()
        await writer.wait_closed()
        count += 1
    done.append(count)


async def load(port: int, workers: int, devices: int, seconds: float) -> float:
    done: list[int] = []
    start = time.monotonic()
    until = start + seconds
    await asyncio.gather(*(worker(port, i, devices, until, done) for i in range(workers)))
    return sum(done) / (time.monotonic() - start)


def run(
    ttl: float, arguments: argparse.Namespace, service: Service, workdir: Path
) -> dict[str, float]:
    config = (
        f'[auth]\nproviders = ["http"]\ncache_ttl = {ttl}\n'
        f'[auth.http]\nurl = "http://{HOST}:{service.port}/auth"\n'
        '[log]\nlevel = "warning"\n'
    )
    # MQTTQ_PURE=1 (the sources of a compiled install) is passed on to the broker.
    pure = {"MQTTQ_PURE": os.environ["MQTTQ_PURE"]} if "MQTTQ_PURE" in os.environ else None
    broker = start_mqttq(workdir / f"ttl{ttl:g}", core=None, config_toml=config, settings_env=pure)
    before = service.requests
    try:
        rate = uvloop.run(
            load(broker.port, arguments.workers, arguments.devices, arguments.seconds)
        )
        cpu = broker.cpu_seconds()
    finally:
        stop_broker(broker)
    return {
        "cache_ttl": ttl,
        "connects_per_s": round(rate),
        "service_requests": service.requests - before,
        "broker_cpu_s": round(cpu, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=32, help="concurrent connection loops")
    parser.add_argument("--devices", type=int, default=20, help="client ids per worker")
    arguments = parser.parse_args()
    service = Service()
    with tempfile.TemporaryDirectory() as tmp:
        results = [run(ttl, arguments, service, Path(tmp)) for ttl in (60.0, 0.0)]
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
