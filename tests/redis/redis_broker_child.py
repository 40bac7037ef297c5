"""The real broker on CompositeStorage(SqliteStorage, RedisMessageQueue), as a subprocess.

    python -m tests.redis.redis_broker_child DATA_DIR REDIS_URL READY_FILE
        [--cluster] [--no-pipelining] [--flush-interval-ms 3]

`mqttq serve` with `[storage] device = "redis"` does the same; this variant exists for
benchmarks/redis_p2p.py, which needs the queue's pipeline statistics at exit. Listens on 127.0.0.1,
port 0; once bound, writes the ready file (`{"pid", "mqtt_port"}`, atomically). SIGTERM
shuts the broker down, writes the queue's statistics to DATA_DIR/stats.json, exits 0.
Runs on uvloop when it is installed, as `mqttq serve` does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from dataclasses import asdict
from pathlib import Path

from mqttq.broker.server import Broker
from mqttq.cli.ready_file import write_ready_file
from mqttq.config import ListenerSettings, Settings
from mqttq.storage.composite import CompositeStorage
from mqttq.storage.redis.queue import RedisMessageQueue
from mqttq.storage.sqlite.store import SqliteStorage


async def main(args: argparse.Namespace) -> None:
    queues = RedisMessageQueue(
        args.redis_url,
        cluster=args.cluster,
        queue_limit=65535,
        pipelining=args.pipelining,
        flush_interval=args.flush_interval_ms / 1000,
    )
    storage = CompositeStorage(SqliteStorage(args.data_dir / "mqttq.sqlite3"), queues)
    broker = Broker(Settings(listener=ListenerSettings(port=0)), storage)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: asyncio.ensure_future(broker.shutdown()))
    await broker.start()
    write_ready_file(args.ready_file, os.getpid(), broker.port)
    await broker.serve_forever()
    (args.data_dir / "stats.json").write_text(json.dumps(asdict(queues.statistics())))


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="redis_broker_child")
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("redis_url")
    parser.add_argument("ready_file", type=Path)
    parser.add_argument("--cluster", action="store_true")
    parser.add_argument("--no-pipelining", dest="pipelining", action="store_false")
    parser.add_argument("--flush-interval-ms", type=float, default=3.0)
    return parser.parse_args(argv)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        import uvloop
    except ImportError:
        asyncio.run(main(parse(sys.argv[1:])))
    else:
        uvloop.run(main(parse(sys.argv[1:])))
