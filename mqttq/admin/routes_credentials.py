"""Admin API handlers for client credentials.

Passwords arrive in clear over the (loopback, token-protected) API and are hashed here
with the slow salted hash of mqttq.auth.passwords, in a worker thread so that the event
loop, which also serves MQTT clients, never waits on it. No answer ever carries the hash.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

from aiohttp import web

from mqttq.admin.call import Call
from mqttq.admin.shapes import credential_json
from mqttq.admin.validation import (
    ApiError,
    parse_credential_changes,
    parse_new_credential,
    scram_for_write,
    scram_request,
)
from mqttq.auth.model import Credential
from mqttq.auth.passwords import hash_password
from mqttq.auth.ports import CredentialExists

__all__ = [
    "add_credential",
    "credential_json",
    "delete_credential",
    "get_credential",
    "list_credentials",
    "put_credential",
]


async def list_credentials(call: Call) -> web.StreamResponse:
    """Credentials, of one tenant when asked."""
    credentials = await call.backend.list_credentials(call.query.get("tenant"))
    return web.json_response({"credentials": [credential_json(c) for c in credentials]})


async def get_credential(call: Call) -> web.StreamResponse:
    """One credential (404 naming `username`)."""
    username = call.path("username")
    credential = await call.backend.get_credential(username)
    if credential is None:
        raise _no_credential(username)
    return web.json_response(credential_json(credential))


async def add_credential(call: Call) -> web.StreamResponse:
    """Create a credential (201; 409 when the username is taken)."""
    backend = call.backend
    body = await call.body()
    username, password, fields = parse_new_credential(body)
    scram = scram_request(body)
    # Checked before hashing too: a taken name should not cost a slow hash. The
    # store's own check (CredentialExists, 409) still settles a race.
    if await backend.get_credential(username) is not None:
        raise CredentialExists(username)
    if password is None:  # an x509 credential: its CN pattern is among the fields
        password_hash = fields.pop("password_hash")
    else:
        password_hash = await asyncio.to_thread(hash_password, password)
    secrets = await asyncio.to_thread(scram_for_write, scram, password, password_hash, ())
    if secrets is not None:
        fields["scram"] = secrets
    now = time.time()
    credential = Credential(username, password_hash, **fields, created_at=now, updated_at=now)
    await backend.add_credential(credential)
    # The store owns the timestamps: answer with the row as stored.
    stored = await backend.get_credential(username) or credential
    return web.json_response(credential_json(stored), status=201)


async def put_credential(call: Call) -> web.StreamResponse:
    """Change some fields of a credential (a new password is hashed)."""
    backend = call.backend
    username = call.path("username")
    body = await call.body()
    password, changes = parse_credential_changes(body)
    existing = await backend.get_credential(username)
    if existing is None:
        raise _no_credential(username)
    password_hash = existing.password_hash
    if password is not None:
        password_hash = changes["password_hash"] = await asyncio.to_thread(hash_password, password)
    secrets = await asyncio.to_thread(
        scram_for_write, scram_request(body), password, password_hash, existing.scram
    )
    if secrets is not None:
        changes["scram"] = secrets
    credential = dataclasses.replace(existing, **changes, updated_at=time.time())
    await backend.put_credential(credential)
    stored = await backend.get_credential(username) or credential
    return web.json_response(credential_json(stored))


async def delete_credential(call: Call) -> web.StreamResponse:
    """Remove a credential (204; 404 naming `username`)."""
    username = call.path("username")
    if not await call.backend.delete_credential(username):
        raise _no_credential(username)
    return web.Response(status=204)


def _no_credential(username: str) -> ApiError:
    return ApiError(404, f"no credential for username {username!r}", "username")
