"""mqttq.auth.authenticator on a real SqliteAuthStore: anonymous modes, credentials,
client-id patterns, tenants, ACL expansion and the verification cache."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from mqttq.auth import authenticator as authenticator_module
from mqttq.auth.authenticator import Authenticator, AuthRefusal, Identity
from mqttq.auth.model import DEFAULT_TENANT, ClientType, Credential
from mqttq.auth.passwords import hash_password, verify_password
from mqttq.auth.ports import AuthStoreError
from mqttq.reasons import ReasonCode
from mqttq.storage.sqlite.auth import SqliteAuthStore

PASSWORD = "correct horse"
NEW_PASSWORD = "battery staple"


@pytest.fixture(scope="module")
def hashes() -> dict[str, str]:
    # scrypt is slow on purpose: hash once for the module.
    return {PASSWORD: hash_password(PASSWORD), NEW_PASSWORD: hash_password(NEW_PASSWORD)}


@pytest.fixture
def alice(hashes: dict[str, str]) -> Credential:
    return Credential(
        "alice",
        hashes[PASSWORD],
        tenant="acme",
        client_type=ClientType.APPLICATION,
        client_id_pattern="alice-*",
        publish_acl=("devices/%c/#", "users/%u/+", "public/#"),
        subscribe_acl=("devices/%c/#",),
    )


class VerifyCalls:
    """Counts the real verify_password's runs (it still does the work)."""

    def __init__(self) -> None:
        self.hashes: list[str] = []

    def __call__(self, password: str, encoded: str) -> bool:
        self.hashes.append(encoded)
        return verify_password(password, encoded)


@pytest.fixture
def verify_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[VerifyCalls]:
    calls = VerifyCalls()
    monkeypatch.setattr(authenticator_module, "verify_password", calls)
    yield calls


Body = Callable[[SqliteAuthStore], Awaitable[None]]


def run(tmp_path: Path, body: Body, *credentials: Credential) -> None:
    async def main() -> None:
        store = SqliteAuthStore(tmp_path / "auth.db")
        await store.open()
        try:
            for credential in credentials:
                await store.add_credential(credential)
            await body(store)
        finally:
            await store.close()

    asyncio.run(main())


async def connect(
    auth: Authenticator,
    username: str | None = "alice",
    password: bytes | None = PASSWORD.encode(),
    *,
    client_id: str = "alice-1",
    tenant_property: str | None = None,
    loopback: bool = True,
) -> Identity | AuthRefusal:
    return await auth.authenticate(
        username=username,
        password=password,
        client_id=client_id,
        tenant_property=tenant_property,
        local_is_loopback=lambda: loopback,
    )


def assert_refused(result: Identity | AuthRefusal, code: ReasonCode, reason: str) -> None:
    assert isinstance(result, AuthRefusal), result
    assert result.reason_code is code
    assert result.reason == reason
    assert result.message


def bad_credentials(result: Identity | AuthRefusal) -> None:
    assert_refused(result, ReasonCode.BAD_USER_NAME_OR_PASSWORD, "bad_credentials")


def not_authorized(result: Identity | AuthRefusal) -> None:
    assert_refused(result, ReasonCode.NOT_AUTHORIZED, "not_authorized")


# --- anonymous ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "loopback", "allowed"),
    [
        ("always", True, True),
        ("always", False, True),
        ("loopback", True, True),
        ("loopback", False, False),
        ("never", True, False),
        ("never", False, False),
    ],
)
def test_anonymous_modes(tmp_path: Path, mode: str, loopback: bool, allowed: bool) -> None:
    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous=mode)
        result = await connect(auth, None, None, client_id="anon", loopback=loopback)
        if allowed:
            assert result == Identity(None, DEFAULT_TENANT, ClientType.DEVICE, None, None)
        else:
            not_authorized(result)

    run(tmp_path, body)


def test_anonymous_tenant_comes_from_the_property(tmp_path: Path) -> None:
    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous="always")
        result = await connect(auth, None, None, tenant_property="acme")
        assert isinstance(result, Identity)
        assert result.tenant == "acme"
        assert result.publish_acl is None
        assert result.subscribe_acl is None
        empty = await connect(auth, None, None, tenant_property="")
        assert isinstance(empty, Identity)
        assert empty.tenant == DEFAULT_TENANT

    run(tmp_path, body)


def test_anonymous_clients_cannot_join_a_tenant_that_has_credentials(tmp_path: Path) -> None:
    """An anonymous client naming a tenant some credential names is refused (it would read
    and write that tenant's whole namespace); other tenants stay open to it."""

    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous="always")
        closed = await connect(auth, None, None, tenant_property="acme")
        not_authorized(closed)
        assert isinstance(closed, AuthRefusal)
        assert closed.tenant == "acme"
        open_tenant = await connect(auth, None, None, tenant_property="hobby")
        assert isinstance(open_tenant, Identity)
        assert open_tenant.tenant == "hobby"
        await store.delete_credential("gw")
        reopened = await connect(auth, None, None, tenant_property="acme")
        assert isinstance(reopened, Identity)
        assert reopened.tenant == "acme"

    run(tmp_path, body, Credential("gw", "never-verified", tenant="acme"))


def test_anonymous_password_without_username_is_ignored(tmp_path: Path) -> None:
    async def body(store: SqliteAuthStore) -> None:
        result = await connect(Authenticator(store, anonymous="always"), None, b"whatever")
        assert isinstance(result, Identity)
        assert result.username is None

    run(tmp_path, body)


def test_unknown_anonymous_mode_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="anonymous"):
        Authenticator(SqliteAuthStore(tmp_path / "auth.db"), anonymous="sometimes")


# --- credentials -------------------------------------------------------------------------


def test_right_password_gives_the_credentials_identity(tmp_path: Path, alice: Credential) -> None:
    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous="never")
        result = await connect(auth, client_id="alice-7", tenant_property="evil")
        assert result == Identity(
            username="alice",
            tenant="acme",  # the credential's: the `tenant` property is ignored
            client_type=ClientType.APPLICATION,
            publish_acl=("devices/alice-7/#", "users/alice/+", "public/#"),
            subscribe_acl=("devices/alice-7/#",),
        )

    run(tmp_path, body, alice)


@pytest.mark.parametrize("mode", ["always", "loopback", "never"])
def test_wrong_password(tmp_path: Path, alice: Credential, mode: str) -> None:
    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous=mode)
        wrong = await connect(auth, password=b"correct horse!", tenant_property="evil")
        bad_credentials(wrong)
        assert isinstance(wrong, AuthRefusal)
        assert wrong.tenant == "acme"  # counted under the credential's tenant, not the hint
        bad_credentials(await connect(auth, password=b""))

    run(tmp_path, body, alice)


@pytest.mark.parametrize("mode", ["always", "loopback", "never"])
def test_unknown_user_is_never_downgraded_to_anonymous(
    tmp_path: Path, alice: Credential, mode: str, verify_calls: VerifyCalls
) -> None:
    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous=mode)
        unknown = await connect(auth, "mallory", loopback=True, tenant_property="acme")
        bad_credentials(unknown)
        assert isinstance(unknown, AuthRefusal)
        assert unknown.tenant is None  # the default tenant: no client charges another
        # The refusal ran one scrypt like a wrong password would (same cost), not alice's.
        assert len(verify_calls.hashes) == 1
        assert verify_calls.hashes[0] != alice.password_hash

    run(tmp_path, body, alice)


def test_missing_or_non_utf8_password(
    tmp_path: Path, alice: Credential, verify_calls: VerifyCalls
) -> None:
    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous="always")
        for username in ("alice", "mallory"):
            bad_credentials(await connect(auth, username, password=None))
            bad_credentials(await connect(auth, username, password=b"\xff\xfe"))
            bad_credentials(await connect(auth, username, password=PASSWORD.encode("utf-16")))
        # Refused before any scrypt, for known and unknown users alike.
        assert verify_calls.hashes == []

    run(tmp_path, body, alice)


def test_refusal_messages_do_not_tell_which_user_names_exist(
    tmp_path: Path, alice: Credential
) -> None:
    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous="never")
        unknown = await connect(auth, "mallory")
        wrong = await connect(auth, password=b"nope")
        assert isinstance(unknown, AuthRefusal)
        assert isinstance(wrong, AuthRefusal)
        # What reaches the client (code and reason string) and the metric's reason are the
        # same; only the tenant the operator's metrics count it under differs.
        assert (unknown.reason_code, unknown.reason, unknown.message) == (
            wrong.reason_code,
            wrong.reason,
            wrong.message,
        )

    run(tmp_path, body, alice)


def test_client_id_must_match_the_pattern(tmp_path: Path, alice: Credential) -> None:
    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous="always")
        assert isinstance(await connect(auth, client_id="alice-42"), Identity)
        not_authorized(await connect(auth, client_id="bob-1"))
        not_authorized(await connect(auth, client_id="ALICE-1"))
        # The password is checked first: a wrong one says so, whatever the client id.
        bad_credentials(await connect(auth, password=b"nope", client_id="bob-1"))

    run(tmp_path, body, alice)


def test_hostile_client_id_cannot_widen_the_acl(tmp_path: Path, alice: Credential) -> None:
    open_pattern = dataclasses.replace(alice, client_id_pattern=None)

    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous="never")
        result = await connect(auth, client_id="#")
        assert isinstance(result, Identity)
        assert result.publish_acl == ("users/alice/+", "public/#")
        assert result.subscribe_acl == ()

    run(tmp_path, body, open_pattern)


# --- cache -------------------------------------------------------------------------------


def test_successful_verifications_are_remembered(
    tmp_path: Path, alice: Credential, verify_calls: VerifyCalls
) -> None:
    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous="never")
        for _ in range(3):
            assert isinstance(await connect(auth), Identity)
        assert len(verify_calls.hashes) == 1
        # Failures are not remembered: each wrong attempt runs scrypt.
        for _ in range(2):
            bad_credentials(await connect(auth, password=b"nope"))
        assert len(verify_calls.hashes) == 3

    run(tmp_path, body, alice)


def test_concurrent_connects_share_one_verification(
    tmp_path: Path, alice: Credential, verify_calls: VerifyCalls
) -> None:
    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous="never")
        results = await asyncio.gather(*(connect(auth, client_id=f"alice-{i}") for i in range(8)))
        assert all(isinstance(result, Identity) for result in results)
        assert len(verify_calls.hashes) == 1

    run(tmp_path, body, alice)


def test_password_change_invalidates_the_cache_by_itself(
    tmp_path: Path, alice: Credential, hashes: dict[str, str]
) -> None:
    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous="never")
        assert isinstance(await connect(auth), Identity)
        await store.put_credential(dataclasses.replace(alice, password_hash=hashes[NEW_PASSWORD]))
        # No invalidate() call: the remembered verification was for the old hash.
        bad_credentials(await connect(auth))
        assert isinstance(await connect(auth, password=NEW_PASSWORD.encode()), Identity)

    run(tmp_path, body, alice)


def test_removed_credential_is_refused_despite_the_cache(tmp_path: Path, alice: Credential) -> None:
    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous="always")
        assert isinstance(await connect(auth), Identity)
        assert await store.delete_credential("alice")
        bad_credentials(await connect(auth))

    run(tmp_path, body, alice)


def test_credential_changes_apply_at_the_next_connect(tmp_path: Path, alice: Credential) -> None:
    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous="never")
        assert isinstance(await connect(auth), Identity)
        moved = dataclasses.replace(alice, tenant="beta", client_id_pattern="x-*")
        await store.put_credential(moved)
        not_authorized(await connect(auth))
        result = await connect(auth, client_id="x-1")
        assert isinstance(result, Identity)
        assert result.tenant == "beta"

    run(tmp_path, body, alice)


def test_invalidate_forgets(tmp_path: Path, alice: Credential, verify_calls: VerifyCalls) -> None:
    bob = dataclasses.replace(alice, username="bob", client_id_pattern=None)

    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous="never")
        await connect(auth)
        await connect(auth, "bob")
        assert len(verify_calls.hashes) == 2
        auth.invalidate("alice")
        await connect(auth)
        await connect(auth, "bob")
        assert len(verify_calls.hashes) == 3  # only alice ran scrypt again
        auth.invalidate()
        await connect(auth)
        await connect(auth, "bob")
        assert len(verify_calls.hashes) == 5

    run(tmp_path, body, alice, bob)


def test_store_failure_propagates(tmp_path: Path, alice: Credential) -> None:
    async def body(store: SqliteAuthStore) -> None:
        auth = Authenticator(store, anonymous="always")
        await store.close()
        with pytest.raises(AuthStoreError):
            await connect(auth)
        # Anonymous clients do not need the store.
        assert isinstance(await connect(auth, None, None), Identity)

    run(tmp_path, body, alice)
