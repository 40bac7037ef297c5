"""The admin API's credentials routes over real HTTP on a real in-process broker: the
whole lifecycle (add, list, show, change, password, remove), conflicts, bad input changing
nothing, and a store that fails (503)."""

from __future__ import annotations

from typing import Any

import pytest

from mqttq.auth.empty_store import EmptyAuthStore
from mqttq.auth.model import ClientType, Credential
from mqttq.auth.passwords import verify_password
from tests.admin.conftest import Api, RunAdmin
from tests.admin.test_admin_http import API, assert_error
from tests.integration.admin_api import CREDENTIAL_KEYS


def test_credential_lifecycle(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        real = api.real
        store = real.store
        body = {
            "username": "sensor-1",
            "password": "s3cret",
            "tenant": "acme",
            "client_type": "APPLICATION",
            "client_id_pattern": "sensor-*",
            "publish_acl": ["acme/%c/#"],
            "subscribe_acl": ["acme/+/cmd", "$share/g/acme/all"],
        }
        created = await api.call("POST", f"{API}/credentials", json=body)
        assert created.status == 201
        assert set(created.body) == CREDENTIAL_KEYS
        assert {k: created.body[k] for k in body if k != "password"} == {
            k: v for k, v in body.items() if k != "password"
        }
        assert created.body["created_at"] == created.body["updated_at"] > 0
        stored = real.call(store.get_credential("sensor-1"))
        assert stored is not None
        assert stored.client_type is ClientType.APPLICATION
        assert stored.subscribe_acl == ("acme/+/cmd", "$share/g/acme/all")
        assert verify_password("s3cret", stored.password_hash)

        shown = await api.get(f"{API}/credentials/sensor-1")
        assert shown.body == created.body
        assert_error(await api.get(f"{API}/credentials/nobody"), 404, "username")

        minimal = await api.call(
            "POST", f"{API}/credentials", json={"username": "plain", "password": "pw"}
        )
        assert minimal.status == 201
        assert minimal.body["tenant"] == "default"
        assert minimal.body["client_type"] == "DEVICE"
        assert minimal.body["client_id_pattern"] is None
        assert minimal.body["publish_acl"] == ["#"] == minimal.body["subscribe_acl"]

        listed = await api.get(f"{API}/credentials")
        assert [c["username"] for c in listed.body["credentials"]] == ["plain", "sensor-1"]
        acme = await api.get(f"{API}/credentials", params={"tenant": "acme"})
        assert [c["username"] for c in acme.body["credentials"]] == ["sensor-1"]
        for answer in (created, shown, minimal, listed):
            assert "password_hash" not in str(answer.body)
            assert "scrypt" not in str(answer.body)

        updated = await api.call(
            "PUT",
            f"{API}/credentials/sensor-1",
            json={"password": "n3w", "publish_acl": [], "client_id_pattern": None},
        )
        assert updated.status == 200
        assert updated.body["publish_acl"] == []
        assert updated.body["client_id_pattern"] is None
        assert updated.body["tenant"] == "acme"
        assert updated.body["created_at"] == created.body["created_at"]
        assert updated.body["updated_at"] >= created.body["updated_at"]
        again = real.call(store.get_credential("sensor-1"))
        assert again is not None
        assert verify_password("n3w", again.password_hash)
        assert not verify_password("s3cret", again.password_hash)

        # A PUT without a password keeps the hash.
        kept = await api.call("PUT", f"{API}/credentials/sensor-1", json={"tenant": "other"})
        assert kept.body["tenant"] == "other"
        after = real.call(store.get_credential("sensor-1"))
        assert after is not None and after.password_hash == again.password_hash

        deleted = await api.call("DELETE", f"{API}/credentials/sensor-1")
        assert deleted.status == 204
        assert real.call(store.get_credential("sensor-1")) is None
        assert_error(await api.call("DELETE", f"{API}/credentials/sensor-1"), 404, "username")
        missing = await api.call("PUT", f"{API}/credentials/sensor-1", json={"tenant": "x"})
        assert_error(missing, 404, "username")

    admin(scenario)


def test_duplicate_username_is_409(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        first = {"username": "u", "password": "one"}
        assert (await api.call("POST", f"{API}/credentials", json=first)).status == 201
        stored = api.real.call(api.real.store.get_credential("u"))
        second = {"username": "u", "password": "two", "tenant": "acme"}
        assert_error(await api.call("POST", f"{API}/credentials", json=second), 409, "username")
        assert api.real.call(api.real.store.get_credential("u")) == stored

    admin(scenario)


BAD_CREDENTIALS: list[tuple[dict[str, Any], str]] = [
    ({"password": "p"}, "username"),
    ({"username": "u"}, "password"),
    ({"username": "", "password": "p"}, "username"),
    ({"username": "a b", "password": "p"}, "username"),
    ({"username": "tab\there", "password": "p"}, "username"),
    ({"username": "u" * 257, "password": "p"}, "username"),
    ({"username": 5, "password": "p"}, "username"),
    ({"username": "u", "password": ""}, "password"),
    ({"username": "u", "password": None}, "password"),
    ({"username": "u", "password": "\ud800"}, "password"),
    ({"username": "u", "password": "p", "tenant": ""}, "tenant"),
    ({"username": "u", "password": "p", "tenant": "a/b"}, "tenant"),
    ({"username": "u", "password": "p", "tenant": "t" * 129}, "tenant"),
    ({"username": "u", "password": "p", "client_type": "device"}, "client_type"),
    ({"username": "u", "password": "p", "client_type": None}, "client_type"),
    ({"username": "u", "password": "p", "client_id_pattern": 3}, "client_id_pattern"),
    ({"username": "u", "password": "p", "client_id_pattern": ""}, "client_id_pattern"),
    ({"username": "u", "password": "p", "publish_acl": "a/#"}, "publish_acl"),
    ({"username": "u", "password": "p", "publish_acl": ["a/#/b"]}, "publish_acl"),
    ({"username": "u", "password": "p", "publish_acl": [""]}, "publish_acl"),
    ({"username": "u", "password": "p", "subscribe_acl": ["ok", 7]}, "subscribe_acl"),
    ({"username": "u", "password": "p", "subscribe_acl": ["a+"]}, "subscribe_acl"),
    ({"username": "u", "password": "p", "subscribe_acl": ["$share/g"]}, "subscribe_acl"),
    ({"username": "u", "password": "p", "password_hash": "x"}, "password_hash"),
    ({"username": "u", "password": "p", "created_at": 1}, "created_at"),
]


BAD_CHANGES: list[tuple[dict[str, Any], str]] = [
    ({k: v for k, v in body.items() if k != "username"}, field)
    for body, field in BAD_CREDENTIALS
    if field not in ("username", "password") or ("password" in body and body["password"] != "p")
] + [({"username": "renamed"}, "username")]


@pytest.mark.parametrize(("body", "field"), BAD_CREDENTIALS)
def test_bad_new_credential_changes_nothing(
    admin: RunAdmin, body: dict[str, Any], field: str
) -> None:
    async def scenario(api: Api) -> None:
        assert_error(await api.call("POST", f"{API}/credentials", json=body), 400, field)
        assert api.real.call(api.real.store.list_credentials()) == []

    admin(scenario)


@pytest.mark.parametrize(("body", "field"), BAD_CHANGES)
def test_bad_credential_change_changes_nothing(
    admin: RunAdmin, body: dict[str, Any], field: str
) -> None:
    async def scenario(api: Api) -> None:
        real = api.real
        store = real.store
        original = Credential("u", "scrypt$stored", tenant="t0", created_at=1.0, updated_at=1.0)
        real.call(store.add_credential(original))
        before = real.call(store.list_credentials())
        assert_error(await api.call("PUT", f"{API}/credentials/u", json=body), 400, field)
        assert real.call(store.list_credentials()) == before

    admin(scenario)


def test_store_failure_is_503(admin: RunAdmin) -> None:
    # A broker without a credential store: every change to one is refused.
    async def scenario(api: Api) -> None:
        answer = await api.call(
            "POST", f"{API}/credentials", json={"username": "u", "password": "p"}
        )
        assert_error(answer, 503, None)
        assert "no credential store" in answer.body["error"]
        assert_error(await api.call("PUT", f"{API}/tenants/acme", json={}), 503, None)

    admin(scenario, auth_store=EmptyAuthStore())
