"""Admin API handlers for client credentials.

Passwords arrive in clear over the (loopback, token-protected) API and are hashed here
with the slow salted hash of mqttq.auth.passwords, in a worker thread so that the event
loop, which also serves MQTT clients, never waits on it. No answer ever carries the hash.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from aiohttp import web

from mqttq.admin.backend import AdminBackend
from mqttq.admin.validation import (
    ApiError,
    parse_credential_changes,
    parse_new_credential,
    query_params,
    read_object,
)
from mqttq.auth.model import Credential
from mqttq.auth.passwords import hash_password
from mqttq.auth.ports import CredentialExists
from mqttq.auth.rules import rule_dict

__all__ = ["credential_json", "credential_routes"]

API = "/api/v1"


def credential_json(credential: Credential) -> dict[str, Any]:
    """The API's credential object: every field but the password hash."""
    return {
        "username": credential.username,
        "tenant": credential.tenant,
        "client_type": credential.client_type.value,
        "client_id_pattern": credential.client_id_pattern,
        "publish_acl": list(credential.publish_acl),
        "subscribe_acl": list(credential.subscribe_acl),
        "acl_rules": [rule_dict(rule) for rule in credential.acl_rules],
        "created_at": credential.created_at,
        "updated_at": credential.updated_at,
    }


def credential_routes(backend: AdminBackend) -> list[web.RouteDef]:
    """The routes under /api/v1/credentials."""

    async def list_credentials(request: web.Request) -> web.Response:
        params = query_params(request, ("tenant",))
        credentials = await backend.list_credentials(params.get("tenant"))
        return web.json_response({"credentials": [credential_json(c) for c in credentials]})

    async def get_credential(request: web.Request) -> web.Response:
        query_params(request, ())
        username = request.match_info["username"]
        credential = await backend.get_credential(username)
        if credential is None:
            raise _no_credential(username)
        return web.json_response(credential_json(credential))

    async def add_credential(request: web.Request) -> web.Response:
        query_params(request, ())
        username, password, fields = parse_new_credential(await read_object(request))
        # Checked before hashing too: a taken name should not cost a slow hash. The
        # store's own check (CredentialExists, 409) still settles a race.
        if await backend.get_credential(username) is not None:
            raise CredentialExists(username)
        password_hash = await asyncio.to_thread(hash_password, password)
        now = time.time()
        credential = Credential(username, password_hash, **fields, created_at=now, updated_at=now)
        await backend.add_credential(credential)
        # The store owns the timestamps: answer with the row as stored.
        stored = await backend.get_credential(username) or credential
        return web.json_response(credential_json(stored), status=201)

    async def put_credential(request: web.Request) -> web.Response:
        query_params(request, ())
        username = request.match_info["username"]
        password, changes = parse_credential_changes(await read_object(request))
        existing = await backend.get_credential(username)
        if existing is None:
            raise _no_credential(username)
        if password is not None:
            changes["password_hash"] = await asyncio.to_thread(hash_password, password)
        credential = dataclasses.replace(existing, **changes, updated_at=time.time())
        await backend.put_credential(credential)
        stored = await backend.get_credential(username) or credential
        return web.json_response(credential_json(stored))

    async def delete_credential(request: web.Request) -> web.Response:
        query_params(request, ())
        username = request.match_info["username"]
        if not await backend.delete_credential(username):
            raise _no_credential(username)
        return web.Response(status=204)

    return [
        web.get(f"{API}/credentials", list_credentials, allow_head=False),
        web.post(f"{API}/credentials", add_credential),
        web.get(f"{API}/credentials/{{username}}", get_credential, allow_head=False),
        web.put(f"{API}/credentials/{{username}}", put_credential),
        web.delete(f"{API}/credentials/{{username}}", delete_credential),
    ]


def _no_credential(username: str) -> ApiError:
    return ApiError(404, f"no credential for username {username!r}", "username")
