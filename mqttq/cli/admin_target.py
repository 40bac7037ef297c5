"""Where `mqttq tenant` and `mqttq credentials` do their work: a running broker's admin API,
or the credential database itself.

The admin API when `--admin-url` (MQTTQ_ADMIN_URL) names one, or when `find_broker` finds a
running broker: through the discovery file in the data dir (`admin.json`, written by
`mqttq serve`), else where `[admin]` says its API listens (127.0.0.1:18083 by default), so
that a command run outside the directory where the broker started still finds it; changes
then take effect in the broker at once. Otherwise no broker is running and the command opens
the AuthStore the settings name (SQLite `auth.db` in the data dir, or PostgreSQL); a command
that creates nothing never creates the data dir or an empty `auth.db` (`EmptyTarget`). Every
target speaks the API's JSON shapes, so the commands print the same thing either way, and
says on stderr which broker or file it used. `admin_session` also turns every failure into
one line on stderr and an exit code.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, Final, Protocol, TypeVar

import typer

from mqttq.admin.client import AdminApiError, AdminClient, AdminUnreachable
from mqttq.admin.client import admin_url as admin_api_url
from mqttq.admin.shapes import credential_json, tenant_json
from mqttq.admin.token import TOKEN_FILE, read_discovery
from mqttq.auth.model import DEFAULT_TENANT, Credential, Tenant
from mqttq.auth.ports import AuthStore, AuthStoreError, CredentialExists
from mqttq.cli.admin_views import JSON, note
from mqttq.cli.errors import EXIT_CONFIG, EXIT_FAILURE, CliError, explain, print_error
from mqttq.cli.serve_admin import AUTH_DB_NAME
from mqttq.config import Settings, load_settings
from mqttq.config.schema import StorageSettings
from mqttq.limits.quota import Quota, QuotaError

__all__ = [
    "ADMIN_TOKEN_ENV",
    "ADMIN_URL_ENV",
    "AdminTarget",
    "AdminUrlOption",
    "ApiTarget",
    "ConfigOption",
    "DataDirOption",
    "DirectTarget",
    "EmptyTarget",
    "FoundBroker",
    "JsonOption",
    "TokenOption",
    "admin_session",
    "configured_admin_url",
    "find_broker",
    "open_target",
    "running_api",
]

T = TypeVar("T")

ADMIN_URL_ENV: Final = "MQTTQ_ADMIN_URL"
ADMIN_TOKEN_ENV: Final = "MQTTQ_ADMIN_TOKEN"
HEALTH_TIMEOUT: Final = 2.0
"""How long a discovered broker may take to answer /health before it counts as gone."""

# The options every `tenant` and `credentials` command takes.
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        envvar="MQTTQ_CONFIG",
        metavar="PATH",
        help="The broker.toml: its auth, postgres, admin, storage and mqtt_limit sections "
        "say where credentials and tenants live.",
    ),
]
DataDirOption = Annotated[
    # A str, not a Path: click turns "" into ".", and an empty data dir is a mistake.
    str | None,
    typer.Option(
        "--data-dir",
        metavar="DIR",
        help="The broker's data dir (storage.data_dir): a running broker's admin.json and "
        "admin-token, and auth.db. Default ./mqttq-data; left at that, a broker whose admin "
        "API answers where [admin] says (127.0.0.1:18083 by default) is used wherever its "
        "data dir is.",
    ),
]
AdminUrlOption = Annotated[
    str | None,
    typer.Option(
        "--admin-url",
        envvar=ADMIN_URL_ENV,
        metavar="URL",
        help="Use the admin API at this URL (http://HOST:PORT) instead of looking for a "
        "running broker (through the data dir, then at the [admin] address).",
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar=ADMIN_TOKEN_ENV,
        metavar="TOKEN",
        help="The admin API's bearer token (else admin.token, else <data dir>/admin-token).",
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON (the admin API's shapes) instead of tables.")
]


class AdminTarget(Protocol):
    """What the commands ask of either target; results are the admin API's JSON shapes.
    A missing tenant or credential is None (or False for a removal), never an error."""

    description: str
    """Where the command went, for the note on stderr."""

    def list_tenants(self) -> JSON:
        """{"default_quota": {...}, "tenants": [tenant, ...]}."""
        ...

    def get_tenant(self, name: str) -> JSON | None: ...

    def put_tenant(self, name: str, fields: Mapping[str, int | float]) -> JSON:
        """Change the given quota fields (the others keep the stored value, else the
        default quota); the tenant as stored."""
        ...

    def delete_tenant(self, name: str) -> bool: ...

    def list_credentials(self, tenant: str | None) -> list[JSON]: ...

    def get_credential(self, username: str) -> JSON | None: ...

    def add_credential(self, body: Mapping[str, Any]) -> JSON:
        """The API's POST body; raises CredentialExists when the username is taken."""
        ...

    def update_credential(self, username: str, body: Mapping[str, Any]) -> JSON | None:
        """The API's PUT body; None when there is no such credential."""
        ...

    def delete_credential(self, username: str) -> bool: ...


# --- through the admin API ---------------------------------------------------------------


class ApiTarget:
    """A running broker's admin API: every change is live. API errors become CliError
    (or CredentialExists for a 409 on add)."""

    live = True
    """Changes apply at once (`mqttq integration` says when a change waits for a start)."""

    def __init__(self, client: AdminClient, token_hint: str) -> None:
        self.client = client
        self.token_hint = token_hint
        self.description = f"via admin API at {client.url}"

    def list_tenants(self) -> JSON:
        return self._call(self.client.list_tenants)

    def get_tenant(self, name: str) -> JSON | None:
        return self._optional(lambda: self.client.get_tenant(name))

    def put_tenant(self, name: str, fields: Mapping[str, int | float]) -> JSON:
        return self._call(lambda: self.client.put_tenant(name, fields))

    def delete_tenant(self, name: str) -> bool:
        def delete() -> bool:
            self.client.delete_tenant(name)
            return True

        return self._optional(delete) is not None

    def list_credentials(self, tenant: str | None) -> list[JSON]:
        answer = self._call(lambda: self.client.list_credentials(tenant))
        return list(answer.get("credentials") or [])

    def get_credential(self, username: str) -> JSON | None:
        return self._optional(lambda: self.client.get_credential(username))

    def add_credential(self, body: Mapping[str, Any]) -> JSON:
        try:
            return self.client.add_credential(body)
        except AdminApiError as exc:
            if exc.status == 409:
                raise CredentialExists(str(body.get("username"))) from None
            raise self._explain(exc) from None
        except AdminUnreachable as exc:
            raise self._explain(exc) from None

    def update_credential(self, username: str, body: Mapping[str, Any]) -> JSON | None:
        return self._optional(lambda: self.client.put_credential(username, body))

    def delete_credential(self, username: str) -> bool:
        def delete() -> bool:
            self.client.delete_credential(username)
            return True

        return self._optional(delete) is not None

    # integrations (`mqttq integration`) ----------------------------------------------------
    def list_integrations(self) -> list[JSON]:
        return self._call(self.client.list_integrations)

    def get_integration(self, name: str) -> JSON | None:
        return self._optional(lambda: self.client.get_integration(name))

    def add_integration(self, table: Mapping[str, Any]) -> JSON:
        """The integration's status; CliError (exit 1) when the name is taken."""
        try:
            return self.client.add_integration(table)
        except AdminApiError as exc:
            if exc.status == 409:
                raise CliError(f"{exc.message}; 'mqttq integration rm' it first") from None
            raise self._explain(exc) from None
        except AdminUnreachable as exc:
            raise self._explain(exc) from None

    def remove_integration(self, name: str) -> bool:
        def delete() -> bool:
            self.client.delete_integration(name)
            return True

        return self._optional(delete) is not None

    def pause_integration(self, name: str, paused: bool) -> JSON | None:
        if paused:
            return self._optional(lambda: self.client.pause_integration(name))
        return self._optional(lambda: self.client.resume_integration(name))

    def test_integration(self, name: str) -> str | None:
        """What the sink answered; None when there is no such integration; CliError
        (exit 1) with the sink's reason when it failed."""
        try:
            answer = self.client.test_integration(name)
        except AdminApiError as exc:
            if exc.status == 404:
                return None
            if exc.status == 400:
                raise CliError(
                    f"{exc.field}: integration {name!r} test failed: {exc.message}", EXIT_CONFIG
                ) from None
            raise self._explain(exc) from None
        except AdminUnreachable as exc:
            raise self._explain(exc) from None
        return str(answer.get("answer", ""))

    def _optional(self, call: Callable[[], T]) -> T | None:
        try:
            return call()
        except AdminApiError as exc:
            if exc.status == 404:
                return None
            raise self._explain(exc) from None
        except AdminUnreachable as exc:
            raise self._explain(exc) from None

    def _call(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except (AdminApiError, AdminUnreachable) as exc:
            raise self._explain(exc) from None

    def _explain(self, exc: AdminApiError | AdminUnreachable) -> CliError:
        if isinstance(exc, AdminUnreachable):
            return CliError(
                f"{exc}; is the broker running? check --admin-url ({ADMIN_URL_ENV})",
                EXIT_FAILURE,
            )
        if exc.status == 401:
            return CliError(f"admin API refused the token; pass --token or check {self.token_hint}")
        if exc.status == 400:
            return CliError(f"{exc.field or 'request'}: {exc.message}", EXIT_CONFIG)
        if exc.status == 429:
            return CliError(f"admin API: too many requests ({exc.message}); try again shortly")
        return CliError(f"admin API: {exc.message} (HTTP {exc.status})")


# --- straight to the database ------------------------------------------------------------


class DirectTarget:
    """The AuthStore itself, for when no broker runs: changes land in the database and a
    broker started later reads them. Runs the store's coroutines on a private event loop;
    use as a context manager (opens and closes the store)."""

    def __init__(self, store: AuthStore, default_quota: Quota, description: str) -> None:
        self.store = store
        self.default_quota = default_quota
        self.description = description
        self._runner = asyncio.Runner()

    def __enter__(self) -> DirectTarget:
        self._runner.__enter__()
        try:
            self._runner.run(self.store.open())
        except BaseException:
            self._runner.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._runner.run(self.store.close())
        finally:
            self._runner.close()

    def list_tenants(self) -> JSON:
        tenants = self._runner.run(self.store.list_tenants())
        return {
            "default_quota": self.default_quota.to_dict(),
            "tenants": [tenant_json(t.name, t.quota, stored=t) for t in tenants],
        }

    def get_tenant(self, name: str) -> JSON | None:
        stored = self._runner.run(self.store.get_tenant(name))
        if stored is not None:
            return tenant_json(name, stored.quota, stored=stored)
        if name == DEFAULT_TENANT:
            return tenant_json(name, self.default_quota, stored=None)
        return None

    def put_tenant(self, name: str, fields: Mapping[str, int | float]) -> JSON:
        _validated(lambda v: v.tenant_name(name, "name"))
        stored = self._runner.run(self.store.get_tenant(name))
        base = stored.quota if stored is not None else self.default_quota
        quota = Quota.from_mapping(fields, base)
        now = time.time()
        created = stored.created_at if stored is not None else now
        tenant = Tenant(name, quota, created_at=created, updated_at=now)
        self._runner.run(self.store.put_tenant(tenant))
        again = self._runner.run(self.store.get_tenant(name)) or tenant
        return tenant_json(name, again.quota, stored=again)

    def delete_tenant(self, name: str) -> bool:
        return self._runner.run(self.store.delete_tenant(name))

    def list_credentials(self, tenant: str | None) -> list[JSON]:
        credentials = self._runner.run(self.store.list_credentials(tenant))
        return [credential_json(c) for c in credentials]

    def get_credential(self, username: str) -> JSON | None:
        credential = self._runner.run(self.store.get_credential(username))
        return None if credential is None else credential_json(credential)

    def add_credential(self, body: Mapping[str, Any]) -> JSON:
        username, password, changes = _validated(lambda v: v.parse_new_credential(body))
        scram = _validated(lambda v: v.scram_request(body))
        # An x509 credential (no password) has its CN pattern among the changes.
        password_hash = changes.pop("password_hash") if password is None else _hash(password)
        secrets = _validated(lambda v: v.scram_for_write(scram, password, password_hash, ()))
        if secrets is not None:
            changes["scram"] = secrets
        now = time.time()
        credential = dataclasses.replace(
            Credential(username, password_hash, created_at=now, updated_at=now), **changes
        )
        self._runner.run(self.store.add_credential(credential))
        return self._stored(credential)

    def update_credential(self, username: str, body: Mapping[str, Any]) -> JSON | None:
        password, changes = _validated(lambda v: v.parse_credential_changes(body))
        existing = self._runner.run(self.store.get_credential(username))
        if existing is None:
            return None
        password_hash = existing.password_hash
        if password is not None:
            password_hash = changes["password_hash"] = _hash(password)
        secrets = _validated(
            lambda v: v.scram_for_write(
                v.scram_request(body), password, password_hash, existing.scram
            )
        )
        if secrets is not None:
            changes["scram"] = secrets
        credential = dataclasses.replace(existing, **changes, updated_at=time.time())
        self._runner.run(self.store.put_credential(credential))
        return self._stored(credential)

    def delete_credential(self, username: str) -> bool:
        return self._runner.run(self.store.delete_credential(username))

    def _stored(self, credential: Credential) -> JSON:
        again = self._runner.run(self.store.get_credential(credential.username))
        return credential_json(again or credential)


class EmptyTarget:
    """No broker and no credential database: what a command that creates nothing sees
    (nothing stored; the default tenant has the default quota). Nothing is created."""

    def __init__(self, default_quota: Quota, description: str) -> None:
        self.default_quota = default_quota
        self.description = description

    def list_tenants(self) -> JSON:
        return {"default_quota": self.default_quota.to_dict(), "tenants": []}

    def get_tenant(self, name: str) -> JSON | None:
        if name == DEFAULT_TENANT:
            return tenant_json(name, self.default_quota, stored=None)
        return None

    def put_tenant(self, name: str, fields: Mapping[str, int | float]) -> JSON:
        raise CliError("nothing can be stored here: no credential database (a bug)")

    def delete_tenant(self, name: str) -> bool:
        return False

    def list_credentials(self, tenant: str | None) -> list[JSON]:
        return []

    def get_credential(self, username: str) -> JSON | None:
        return None

    def add_credential(self, body: Mapping[str, Any]) -> JSON:
        raise CliError("nothing can be stored here: no credential database (a bug)")

    def update_credential(self, username: str, body: Mapping[str, Any]) -> JSON | None:
        return None

    def delete_credential(self, username: str) -> bool:
        return False


def _validated(check: Callable[[ModuleType], T]) -> T:
    """`check(mqttq.admin.validation)`: direct mode accepts exactly what the API accepts,
    and a refusal names the field like the API's 400 does."""
    from mqttq.admin import validation  # noqa: PLC0415 (imports aiohttp: only when needed)

    try:
        return check(validation)
    except validation.ApiError as exc:
        raise CliError(f"{exc.field or 'request'}: {exc.message}", EXIT_CONFIG) from None


def _hash(password: str) -> str:
    from mqttq.auth.passwords import hash_password  # noqa: PLC0415 (only direct mode hashes)

    return hash_password(password)


# --- choosing ----------------------------------------------------------------------------


def _alive(pid: object) -> bool:
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # somebody else's process: alive all the same
    return True


def _token(flag: str | None, settings: Settings, data_dir: Path) -> str | None:
    """--token (or MQTTQ_ADMIN_TOKEN), else admin.token, else the token file in the
    broker's `data_dir`."""
    if flag:
        return flag
    if settings.admin.token:
        return settings.admin.token
    try:
        return (data_dir / TOKEN_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def _redacted(url: str) -> str:
    """`url` without its password, for notes."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def configured_admin_url(settings: Settings) -> str | None:
    """Where `[admin]` says a broker's API listens (`http://127.0.0.1:18083` by default);
    None when the settings give it no fixed address (admin.enabled = false, or port 0)."""
    admin = settings.admin
    if not admin.enabled or admin.port == 0:
        return None
    return admin_api_url(admin.host, admin.port)


def _data_dir_given(settings: Settings) -> bool:
    """Whether the data dir was chosen (--data-dir, the config, MQTTQ_STORAGE__DATA_DIR)
    rather than left at its default, ./mqttq-data."""
    return settings.storage.data_dir != StorageSettings().data_dir


@dataclasses.dataclass(frozen=True, slots=True)
class FoundBroker:
    """A running broker whose admin API answered /health."""

    url: str
    data_dir: Path | None
    """Its data dir, as /health says (None from a broker that does not say)."""
    how: str
    """How it was found, for the note."""


def find_broker(settings: Settings) -> tuple[FoundBroker | None, str]:
    """The running broker `mqttq tenant` and `mqttq credentials` go to, without --admin-url,
    and what was looked at (for the note when none is found):

    1. the broker whose discovery file (admin.json) is in the data dir, when its process
       is alive and its API answers;
    2. else the broker whose API answers where `[admin]` says it listens
       (`configured_admin_url`): with the default data dir, whichever broker that is (a
       command run outside the directory where `mqttq serve` started finds it there);
       with a data dir given, only a broker on that same data dir.
    """
    data_dir = settings.storage.data_dir
    looked = [f"no admin.json of a live broker in {data_dir}"]
    discovery = read_discovery(data_dir)
    if discovery is not None and _alive(discovery.get("pid")):
        url = str(discovery.get("url") or "")
        if url and _health(url) is not None:
            return FoundBroker(url, data_dir, f"the broker on {data_dir}"), ""
    configured = configured_admin_url(settings)
    if configured is None:
        return None, looked[0]
    health = _health(configured)
    if health is None:
        looked.append(f"no broker answers at {configured}")
        return None, ", ".join(looked)
    reported = health.get("data_dir")
    theirs = Path(reported) if isinstance(reported, str) and reported else None
    if _data_dir_given(settings) and (theirs is None or not _same_dir(theirs, data_dir)):
        looked.append(f"the broker at {configured} has another data dir ({theirs or 'unknown'})")
        return None, ", ".join(looked)
    on = f"the broker on {theirs}" if theirs is not None else "a broker"
    return FoundBroker(configured, theirs, f"{on}, found at the [admin] address"), ""


def _health(url: str) -> JSON | None:
    """The /health answer of the admin API at `url` when it says ok; else None."""
    try:
        health = AdminClient(url, "", HEALTH_TIMEOUT).health()
    except (AdminApiError, AdminUnreachable):
        return None
    return health if health.get("status") == "ok" else None


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def running_api(
    settings: Settings, admin_url: str | None, token: str | None
) -> tuple[ApiTarget | None, str]:
    """The admin API a command goes to: `admin_url` when given, else the running broker
    `find_broker` finds, with its token; (None, what was looked at) when no broker runs.
    CliError when a broker is there but no token can be found."""
    if admin_url:
        found_token = _token(token, settings, settings.storage.data_dir)
        if found_token is None:
            raise CliError(
                f"no admin API token: pass --token ({ADMIN_TOKEN_ENV}) or set admin.token",
                EXIT_CONFIG,
            )
        token_hint = str(settings.storage.data_dir / TOKEN_FILE)
        return ApiTarget(AdminClient(admin_url, found_token), token_hint), ""
    broker, looked = find_broker(settings)
    if broker is None:
        return None, looked
    token_dir = broker.data_dir or settings.storage.data_dir
    found_token = _token(token, settings, token_dir)
    if found_token is None:
        raise CliError(
            f"a broker is running (admin API at {broker.url}, {broker.how}) but "
            f"{token_dir / TOKEN_FILE} cannot be read; pass --token ({ADMIN_TOKEN_ENV})"
        )
    target = ApiTarget(AdminClient(broker.url, found_token), str(token_dir / TOKEN_FILE))
    target.description = f"via admin API at {broker.url} ({broker.how})"
    return target, ""


@contextlib.contextmanager
def open_target(
    settings: Settings, admin_url: str | None, token: str | None, *, creates: bool = True
) -> Iterator[AdminTarget]:
    """The target a command goes to (see the module docstring), open for the block. With
    `creates` false (commands that read, or change only what exists) a missing SQLite
    credential database is not created: the command sees an empty one."""
    api, looked = running_api(settings, admin_url, token)
    if api is not None:
        yield api
        return
    if settings.auth.store == "postgres":
        where = f"PostgreSQL at {_redacted(settings.postgres.url)}"
    else:
        path = settings.storage.data_dir / AUTH_DB_NAME
        where = str(path)
        if not creates and not path.exists():
            yield EmptyTarget(
                settings.mqtt_limit.tenant,
                f"broker not running ({looked}) and no {path}: nothing stored yet",
            )
            return
    from mqttq.cli.serve_admin import open_auth_store  # noqa: PLC0415

    with DirectTarget(
        open_auth_store(settings),
        settings.mqtt_limit.tenant,
        f"broker not running: editing {where} directly ({looked})",
    ) as direct:
        yield direct


@contextlib.contextmanager
def admin_session(
    config: Path | None,
    data_dir: str | None,
    admin_url: str | None,
    token: str | None,
    *,
    creates: bool = True,
) -> Iterator[AdminTarget]:
    """Load the settings (like `mqttq serve`: --config, MQTTQ_* env, --data-dir), open the
    target (`creates`: see `open_target`), say on stderr where the command goes, and run
    the block. Any failure a user can fix ends the command with one line on stderr and
    exit 1 (2 for bad input or configuration); nothing else is printed."""
    settings: Settings | None = None
    try:
        settings = load_settings(config, os.environ, {"storage.data_dir": data_dir})
        with open_target(settings, admin_url, token, creates=creates) as target:
            note(target.description)
            yield target
    except Exception as exc:
        explained = _explain(exc, settings)
        if explained is None:
            raise
        message, code = explained
        print_error(message)
        raise typer.Exit(code) from None


def _explain(exc: BaseException, settings: Settings | None) -> tuple[str, int] | None:
    if isinstance(exc, QuotaError):
        return str(exc), EXIT_CONFIG
    if isinstance(exc, AuthStoreError) and settings is not None:
        if settings.auth.store == "postgres":
            hint = "check [postgres] url (postgres.url, MQTTQ_POSTGRES__URL)"
        else:
            hint = "check --data-dir (storage.data_dir)"
        return f"credential store failed: {exc}; {hint}", EXIT_FAILURE
    if isinstance(exc, sqlite3.Error) and settings is not None:
        return (
            f"cannot use the credential database in {settings.storage.data_dir}: {exc}; "
            "check --data-dir (storage.data_dir)",
            EXIT_FAILURE,
        )
    return explain(exc, settings)
