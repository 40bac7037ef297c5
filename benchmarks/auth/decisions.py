"""What an authentication decision costs, in this process (not a test).

Wall and CPU time per decision on the event loop, N decisions in a row after a warm-up,
the fastest of five runs:

- `credentials`: today's check, `Authenticator.authenticate` (credential read from SQLite
  in a thread, the verified hash remembered: no scrypt after the first);
- `chain credentials`: the same through the provider chain (its overhead);
- `chain cached`: a decision from the chain's cache (an http provider answered once);
- `jwt RS256`: the jwt provider verifying one RS256 token with its key held (no chain
  cache), and `jwt HS256`.

    python benchmarks/auth/decisions.py --count 5000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import jwt as pyjwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from mqttq.auth.authenticator import Authenticator, AuthRefusal, Identity
from mqttq.auth.model import ClientType, Credential
from mqttq.auth.passwords import hash_password
from mqttq.auth.providers.base import AuthRequest, Decision
from mqttq.auth.providers.chain import ProviderChain
from mqttq.auth.providers.credentials import CredentialsProvider
from mqttq.auth.providers.jwks import JwtKeys
from mqttq.auth.providers.jwt import JwtProvider
from mqttq.storage.sqlite.auth import SqliteAuthStore

GRANT = Identity("dev", "default", ClientType.DEVICE, None, None)


class Granting:
    """A cacheable provider that allows (stands for the http provider's first answer)."""

    name = "http"
    cacheable = True

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def authenticate(self, request: AuthRequest) -> Decision:
        return GRANT


REPEAT = 5
"""Runs per measurement: the fastest is reported (the others met a busy machine)."""


async def per_call_us(call: Callable[[], Awaitable[object]], count: int) -> dict[str, float]:
    """Wall and CPU (all threads of the process) microseconds per call, the fastest run."""
    for _ in range(min(200, count)):
        await call()
    wall = cpu = float("inf")
    for _ in range(REPEAT):
        start, start_cpu = time.perf_counter(), time.process_time()
        for _ in range(count):
            await call()
        wall = min(wall, (time.perf_counter() - start) / count * 1e6)
        cpu = min(cpu, (time.process_time() - start_cpu) / count * 1e6)
    return {"wall_us": round(wall, 1), "cpu_us": round(cpu, 1)}


def check(result: Identity | AuthRefusal | object) -> None:
    if not isinstance(result, Identity):
        raise SystemExit(f"expected an allow, got {result!r}")


async def main(count: int) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteAuthStore(Path(tmp) / "auth.db")
        await store.open()
        await store.add_credential(Credential("dev", hash_password("pw")))
        authenticator = Authenticator(store, anonymous="never")
        request = AuthRequest("dev-1", "dev", b"pw", "127.0.0.1", "tcp")

        async def credentials() -> None:
            check(
                await authenticator.authenticate(
                    username="dev",
                    password=b"pw",
                    client_id="dev-1",
                    tenant_property=None,
                    local_is_loopback=lambda: True,
                )
            )

        results["credentials"] = await per_call_us(credentials, count)
        chain = ProviderChain([CredentialsProvider(authenticator)], cache_ttl=60)

        async def chain_credentials() -> None:
            check(await chain.decide(request))

        results["chain credentials"] = await per_call_us(chain_credentials, count)
        cached = ProviderChain([Granting()], cache_ttl=60)

        async def chain_cached() -> None:
            check(await cached.decide(request))

        results["chain cached"] = await per_call_us(chain_cached, count)
        await store.close()

        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = Path(tmp) / "public.pem"
        pem.write_bytes(
            private.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        keys = JwtKeys(public_key_file=str(pem))
        rs = JwtProvider(algorithms=["RS256"], keys=keys)
        await rs.open()
        claims = {"sub": "dev", "exp": int(time.time()) + 3600}
        rs_request = AuthRequest(
            "dev-1", None, pyjwt.encode(claims, private, "RS256").encode(), "127.0.0.1", "tcp"
        )

        async def jwt_rs256() -> None:
            check(await rs.authenticate(rs_request))

        results["jwt RS256"] = await per_call_us(jwt_rs256, count)
        await rs.close()
        secret = b"a-benchmark-secret-of-32-bytes-ok"
        hs = JwtProvider(algorithms=["HS256"], secret=secret)
        hs_request = AuthRequest(
            "dev-1", None, pyjwt.encode(claims, secret, "HS256").encode(), "127.0.0.1", "tcp"
        )

        async def jwt_hs256() -> None:
            check(await hs.authenticate(hs_request))

        results["jwt HS256"] = await per_call_us(jwt_hs256, count)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000, help="decisions per measurement")
    arguments = parser.parse_args()
    figures = asyncio.run(main(arguments.count))
    print(json.dumps(figures, indent=2))
