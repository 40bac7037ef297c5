"""Micro-benchmark of what issue 5 adds per operation (a script, not a test).

Times, with `time.process_time`, the work the broker now does per PUBLISH (the two-layer
publish rate check, and the publish ACL match for a client that has an ACL) and per
CONNECT (the password check: scrypt on a first connect, the verification cache after).

    python benchmarks/micro/limits_micro.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from mqttq.auth.acl import expand_acl, may_publish
from mqttq.auth.authenticator import Authenticator
from mqttq.auth.model import Credential
from mqttq.auth.passwords import hash_password, verify_password
from mqttq.limits.limiter import Limits
from mqttq.limits.quota import Quota
from mqttq.storage.sqlite.auth import SqliteAuthStore


def per_call(label: str, call: Callable[[int], object], seconds: float) -> None:
    """Run `call(i)` for about `seconds` of CPU; print the CPU time per call."""
    n = 0
    batch = 1000
    start = time.process_time()
    while time.process_time() - start < seconds:
        for i in range(n, n + batch):
            call(i)
        n += batch
    elapsed = time.process_time() - start
    print(f"{label:<48} {elapsed / n * 1e6:8.2f} us/op  ({n:,} ops)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    now = time.monotonic()
    limits = Limits(Quota(), Quota(), rate_wait=1.0, burst_seconds=1.0, tcp_rate=1e4, now=now)
    per_call(
        "admit_publish (node + tenant bucket)",
        lambda i: limits.admit_publish("acme", now + i * 1e-6),
        args.seconds,
    )
    acl = expand_acl(["telemetry/%c/#", "status/%c"], "gw-17", "gw")
    per_call(
        "may_publish (2-filter ACL, match)",
        lambda _i: may_publish(acl, "telemetry/gw-17/temp/1"),
        args.seconds,
    )
    encoded = hash_password("s3cret")
    started = time.process_time()
    rounds = 5
    for _ in range(rounds):
        verify_password("s3cret", encoded)
    print(
        f"{'verify_password (scrypt n=2^14, r=8, p=1)':<48} "
        f"{(time.process_time() - started) / rounds * 1e3:8.2f} ms/op"
    )
    asyncio.run(_cached_connects(encoded, args.seconds))


async def _cached_connects(encoded: str, seconds: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteAuthStore(Path(tmp) / "auth.db")
        await store.open()
        await store.add_credential(Credential("gw", encoded, tenant="acme"))
        auth = Authenticator(store, anonymous="never")
        n = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            await auth.authenticate(
                username="gw",
                password=b"s3cret",
                client_id=f"gw-{n}",
                tenant_property=None,
                local_is_loopback=lambda: True,
            )
            n += 1
        elapsed = time.perf_counter() - start
        print(
            f"{'authenticate, cached (SQLite lookup in a thread)':<48} "
            f"{elapsed / n * 1e6:8.2f} us/op wall  ({n:,} ops)"
        )
        await store.close()


if __name__ == "__main__":
    main()
