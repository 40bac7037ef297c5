"""The `postgres` sink: deliveries as rows of a PostgreSQL (or TimescaleDB) table.

Each delivery becomes one row; `columns` maps each column to a source (the topic, the
client id, the receive time, the payload as JSONB, bytea or text, a field of a JSON
payload, a user property). A batch is one transaction, written with COPY (the default) or
an `executemany` INSERT. When the batch fails because a row violates a constraint or holds
a value its column cannot take (SQLSTATE classes 22 and 23), the batch is written again row
by row, each row in its own savepoint: the bad rows come back as `Rejected` (dead-lettered)
and the others are committed, in order. A server that is down, gone or silent, a table or
column that is missing, a permission refused: `SinkUnavailable`, the connection is
dropped, and the next `send` reconnects (and checks the table again).

Secrets: `url` and `table` may hold `${NAME}`, expanded from the environment when the sink
opens; `public()` shows the URL with its password as "***", and no message of this module
holds the password.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Final
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import psycopg
from psycopg import sql

from mqttq.errors import ConfigError
from mqttq.integrations.record import Delivery
from mqttq.integrations.secrets import expand_env, mentions_env
from mqttq.integrations.sink import Rejected, SinkRejected, SinkUnavailable

__all__ = ["DEFAULT_COLUMNS", "PostgresSink", "PostgresSinkSettings"]

Conn = psycopg.AsyncConnection[tuple[Any, ...]]
Value = str | bytes | None
"""A column's value as the sink sends it: text the server casts to the column's type
(unknown-typed, as a literal in SQL would be), bytes for bytea, or NULL."""

PLAIN_SOURCES: Final = {
    "topic": "text NOT NULL",
    "client_id": "text NOT NULL",
    "tenant": "text NOT NULL",
    "qos": "smallint NOT NULL",
    "retain": "boolean NOT NULL",
    "timestamp": "timestamptz NOT NULL",
    "payload": "bytea NOT NULL",
    "payload_json": "jsonb",
    "payload_raw": "bytea",
    "seq": "bigint NOT NULL",
    "integration": "text NOT NULL",
}
"""Every source but `payload.<path>` and `user_property.<name>`, with the column type
`create_table` gives it."""

DEFAULT_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("topic", "topic"),
    ("client_id", "client_id"),
    ("tenant", "tenant"),
    ("qos", "qos"),
    ("retain", "retain"),
    ("received_at", "timestamp"),
    ("payload", "payload_json"),
    ("payload_raw", "payload_raw"),
)
"""The mapping when `columns` is not given: a JSON payload lands in `payload` (jsonb), any
other payload in `payload_raw` (bytea), so that no payload is refused or lost."""

INSERT_MODES: Final = ("copy", "executemany")
ON_CONFLICT: Final = ("reject", "ignore")
DEFAULT_TIMEOUT_MS: Final = 30_000
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_URL_SCHEMES: Final = ("postgresql://", "postgres://")
_JSON_TYPES: Final = frozenset({"json", "jsonb"})


def _fail(where: str, key: str, problem: str) -> ConfigError:
    return ConfigError(f"{where}.{key}", problem)


def _table_name(value: object, where: str, key: str = "table") -> tuple[str, ...]:
    """("schema", "table") or ("table",) from `value`; ConfigError naming `key` if bad."""
    if not isinstance(value, str) or not value:
        raise _fail(where, key, f"must be a table name (string), got {value!r}")
    parts = tuple(value.split("."))
    if len(parts) > 2 or not all(_IDENTIFIER.fullmatch(part) for part in parts):
        raise _fail(
            where,
            key,
            f"must be a table name or schema.table, each a letter or _ then letters, digits "
            f"or _ (at most 63), got {value!r}",
        )
    return parts


def _check_source(source: object, where: str, key: str) -> str:
    if not isinstance(source, str):
        raise _fail(where, key, f"must be a source name (string), got {source!r}")
    if source in PLAIN_SOURCES:
        return source
    for prefix in ("payload.", "user_property."):
        if source.startswith(prefix):
            rest = source[len(prefix) :]
            if rest and (prefix == "user_property." or all(rest.split("."))):
                return source
            raise _fail(where, key, f"{source!r} needs a name after {prefix!r}")
    known = ", ".join([*PLAIN_SOURCES, "payload.<json.path>", "user_property.<name>"])
    raise _fail(where, key, f"unknown source {source!r}; one of {known}")


def public_url(url: str) -> str:
    """`url` with its password (in the user part or a `password=` parameter) as "***"."""
    head, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, tail = rest.partition("/")
    user_info, at, hosts = netloc.rpartition("@")
    if at and ":" in user_info:
        netloc = f"{user_info.partition(':')[0]}:***@{hosts}"
    path, question, query = tail.partition("?")
    if question:
        pairs = [(k, "***" if k == "password" else v) for k, v in parse_qsl(query, True)]
        query = urlencode(pairs, safe="*${}")
    return f"{head}://{netloc}{slash}{path}{question}{query}"


def _password(url: str) -> str:
    """The password of an expanded `url` ('' when it has none), to keep out of messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    found = unquote(parts.password or "")
    for key, value in parse_qsl(parts.query, True):
        if key == "password":
            found = value
    return found


@dataclass(frozen=True, slots=True)
class PostgresSinkSettings:
    """The `postgres` sink's own keys of an `[[integration]]` table, checked.

    `url` is a postgresql:// URL; `table` a table name, optionally schema-qualified, used
    as written (quoted: case matters); `columns` maps each column to a source; with
    `create_table` the table is created when missing (columns typed by their source);
    `insert` is "copy" or "executemany"; `on_conflict` "reject" dead-letters a row that
    violates a unique constraint, "ignore" takes it as written already (a redelivery, with
    a unique index on `integration` and `seq`); `timeout_ms` bounds connecting and each
    batch.
    """

    KEYS: ClassVar[frozenset[str]] = frozenset(
        {"url", "table", "columns", "create_table", "insert", "on_conflict", "timeout_ms"}
    )

    url: str
    table: str
    columns: tuple[tuple[str, str], ...] = DEFAULT_COLUMNS
    create_table: bool = False
    insert: str = "copy"
    on_conflict: str = "reject"
    timeout_ms: int = DEFAULT_TIMEOUT_MS

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str) -> PostgresSinkSettings:
        """The settings from `table` (other keys are ignored), or ConfigError naming the
        key at fault as `<where>.<key>`."""
        url = table.get("url")
        if not isinstance(url, str) or not url.startswith(_URL_SCHEMES):
            shown = public_url(url) if isinstance(url, str) else url
            raise _fail(where, "url", f"must be a postgresql:// URL, got {shown!r}")
        name = table.get("table")
        if not (isinstance(name, str) and mentions_env(name)):
            _table_name(name, where)
        columns = DEFAULT_COLUMNS
        if "columns" in table:
            mapping = table["columns"]
            if not isinstance(mapping, Mapping) or not mapping:
                raise _fail(
                    where, "columns", f"must be a table of column = source, got {mapping!r}"
                )
            checked = []
            for column, source in mapping.items():
                key = f"columns.{column}"
                if not isinstance(column, str) or not _IDENTIFIER.fullmatch(column):
                    raise _fail(
                        where,
                        key,
                        "a column name is a letter or _ then letters, digits or _ (at most 63)",
                    )
                checked.append((column, _check_source(source, where, key)))
            columns = tuple(checked)
        create = table.get("create_table", False)
        if not isinstance(create, bool):
            raise _fail(where, "create_table", f"must be true or false, got {create!r}")
        insert = table.get("insert", "copy")
        if insert not in INSERT_MODES:
            raise _fail(where, "insert", f'must be "copy" or "executemany", got {insert!r}')
        on_conflict = table.get("on_conflict", "reject")
        if on_conflict not in ON_CONFLICT:
            raise _fail(where, "on_conflict", f'must be "reject" or "ignore", got {on_conflict!r}')
        timeout = table.get("timeout_ms", DEFAULT_TIMEOUT_MS)
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0:
            raise _fail(where, "timeout_ms", f"must be a positive integer, got {timeout!r}")
        assert isinstance(name, str)
        return cls(url, name, columns, create, insert, on_conflict, timeout)

    def public(self) -> dict[str, Any]:
        """The settings as the admin API shows them: the URL's password as "***"."""
        return {
            "url": public_url(self.url),
            "table": self.table,
            "columns": dict(self.columns),
            "create_table": self.create_table,
            "insert": self.insert,
            "on_conflict": self.on_conflict,
            "timeout_ms": self.timeout_ms,
        }


class _RowRefused(Exception):
    """A delivery whose row can never be written (found before the server sees it)."""


_NOT_JSON: Final = object()


def _parse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json(delivery: Delivery) -> Any:
    """The payload as JSON, or `_NOT_JSON`."""
    try:
        return json.loads(delivery.payload.decode("utf-8"), parse_constant=_parse_constant)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return _NOT_JSON


def _text(value: str) -> str:
    if "\x00" in value:
        raise _RowRefused("a text value holds a NUL character, which PostgreSQL cannot store")
    return value


def _payload_text(delivery: Delivery) -> str:
    text = delivery.payload_text()
    if text is None:
        raise _RowRefused("the payload is not UTF-8 text, which its column needs")
    return _text(text)


def _field(value: Any, path: Sequence[str]) -> Any:
    for step in path:
        if isinstance(value, dict):
            value = value.get(step)
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return None
    return value


def _field_value(value: Any, json_column: bool) -> Value:
    if value is None:
        return None
    if json_column or isinstance(value, dict | list):
        return _text(json.dumps(value, ensure_ascii=False))
    if isinstance(value, bool):
        return "true" if value else "false"
    return _text(str(value))


Extract = Callable[[Delivery, list[Any]], Value]
"""A column's value for a delivery; the list caches the parsed JSON payload."""


def _parsed(delivery: Delivery, cache: list[Any]) -> Any:
    if not cache:
        cache.append(_json(delivery))
    return cache[0]


def _extractor(source: str, column_type: str, integration: str) -> Extract:
    """How a column of `column_type` (its base type's name) gets its value from `source`
    (`integration`: the integration's name, the `integration` source's value)."""
    json_column = column_type in _JSON_TYPES
    if source.startswith("payload."):
        path = tuple(source[len("payload.") :].split("."))

        def field(d: Delivery, cache: list[Any]) -> Value:
            parsed = _parsed(d, cache)
            found = None if parsed is _NOT_JSON else _field(parsed, path)
            return _field_value(found, json_column)

        return field
    if source.startswith("user_property."):
        name = source[len("user_property.") :]

        def user_property(d: Delivery, cache: list[Any]) -> Value:
            found = next((v for k, v in d.user_properties if k == name), None)
            return None if found is None else _field_value(found, json_column)

        return user_property
    if source == "payload":
        if column_type == "bytea":
            return lambda d, cache: d.payload
        if json_column:

            def payload_json(d: Delivery, cache: list[Any]) -> Value:
                if _parsed(d, cache) is _NOT_JSON:
                    raise _RowRefused(
                        f"the payload is not JSON, which a {column_type} column needs"
                    )
                return _payload_text(d)

            return payload_json
        return lambda d, cache: _payload_text(d)
    if source == "payload_json":
        return lambda d, cache: None if _parsed(d, cache) is _NOT_JSON else _payload_text(d)
    if source == "payload_raw":
        return lambda d, cache: d.payload if _parsed(d, cache) is _NOT_JSON else None
    if source == "integration":
        return lambda d, cache: integration
    plain: dict[str, Callable[[Delivery], Value]] = {
        "topic": lambda d: _text(d.topic),
        "client_id": lambda d: _text(d.client_id),
        "tenant": lambda d: _text(d.tenant),
        "qos": lambda d: str(d.qos),
        "retain": lambda d: "true" if d.retain else "false",
        "timestamp": lambda d: datetime.fromtimestamp(d.timestamp_ms / 1000, UTC).isoformat(),
        "seq": lambda d: str(d.seq),
    }
    one = plain[source]
    return lambda d, cache: one(d)


def _source_type(source: str) -> str:
    if source.startswith("payload."):
        return "jsonb"
    if source.startswith("user_property."):
        return "text"
    return PLAIN_SOURCES[source]


_COLUMN_TYPES: Final = """
SELECT a.attname, bt.typname
FROM pg_attribute a
JOIN pg_type t ON t.oid = a.atttypid
JOIN pg_type bt ON bt.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped
"""


class PostgresSink:
    """Writes batches into one table over one connection (see the module's docstring)."""

    def __init__(self, settings: PostgresSinkSettings, name: str) -> None:
        self.settings = settings
        self.name = name
        self._conn: Conn | None = None
        self._secret = ""
        self._where = f"integration[{name}]"
        self._server = "?"
        self._at = "postgres"
        self._table: sql.Composable = sql.SQL("")
        self._extract: tuple[Extract, ...] = ()
        self._copy = sql.Composed([])
        self._insert = sql.Composed([])
        self._timeout = settings.timeout_ms / 1000

    async def open(self) -> None:
        """Connect, create the table if asked and it is missing, and read its column types;
        SinkUnavailable (one line, no password) when any of it fails."""
        if self._conn is not None and not self._conn.closed:
            return
        try:
            async with asyncio.timeout(self._timeout):
                await self._open()
        except TimeoutError:
            await self._drop()
            raise SinkUnavailable(f"{self._at}: no answer within {self._timeout:g} s") from None
        except psycopg.Error as exc:
            await self._drop()
            raise SinkUnavailable(self._reason(exc)) from None
        except BaseException:
            await self._drop()
            raise

    async def _open(self) -> None:
        try:
            url = expand_env(self.settings.url, f"{self._where}.url")
            table = expand_env(self.settings.table, f"{self._where}.table")
            names = _table_name(table, self._where)
        except ConfigError as exc:
            raise SinkUnavailable(str(exc)) from None
        self._secret = _password(url)
        parts = urlsplit(url)
        self._server = f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path}"
        self._at = f"postgres {self._server}"
        self._conn = await psycopg.AsyncConnection.connect(
            url, autocommit=True, connect_timeout=max(1, int(self._timeout))
        )
        self._table = sql.Identifier(*names)
        qualified = self._table.as_string(self._conn)
        if self.settings.create_table:
            await self._create(qualified)
        cursor = await self._conn.execute(_COLUMN_TYPES, (qualified,))
        types = {str(name): str(kind) for name, kind in await cursor.fetchall()}
        if not types:
            raise SinkUnavailable(
                f"{self._at}: table {table} does not exist; create it or set create_table = true"
            )
        missing = [column for column, _ in self.settings.columns if column not in types]
        if missing:
            raise SinkUnavailable(
                f"{self._at}: table {table} has no column {', '.join(missing)}; add it or "
                f"change columns"
            )
        self._extract = tuple(
            _extractor(source, types[column], self.name) for column, source in self.settings.columns
        )
        columns = sql.SQL(", ").join(sql.Identifier(c) for c, _ in self.settings.columns)
        self._copy = sql.SQL("COPY {} ({}) FROM STDIN").format(self._table, columns)
        # %t: text-format, unknown-typed parameters, cast by the server as COPY's text is.
        marks = sql.SQL(", ").join(sql.SQL("%t") for _ in self.settings.columns)
        # A COPY that meets a duplicate fails; the row-by-row retry then skips it.
        conflict = " ON CONFLICT DO NOTHING" if self.settings.on_conflict == "ignore" else ""
        self._insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})" + conflict).format(
            self._table, columns, marks
        )

    async def _create(self, qualified: str) -> None:
        assert self._conn is not None
        definition = sql.SQL(", ").join(
            sql.SQL("{} {}").format(sql.Identifier(column), sql.SQL(_source_type(source)))
            for column, source in self.settings.columns
        )
        async with self._conn.transaction():
            # Two nodes opening at once must not race on CREATE TABLE IF NOT EXISTS.
            await self._conn.execute(
                "SELECT pg_advisory_xact_lock(%s)", (zlib.crc32(qualified.encode()),)
            )
            await self._conn.execute(
                sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(self._table, definition)
            )

    async def send(self, batch: Sequence[Delivery]) -> Sequence[Rejected]:
        """Write `batch` in order in one transaction; the rows that can never be written
        come back as Rejected and the others are committed (see the module's docstring)."""
        if not batch:
            return []
        await self.open()
        try:
            async with asyncio.timeout(self._timeout):
                return await self._send(batch)
        except TimeoutError:
            await self._drop()
            raise SinkUnavailable(f"{self._at}: no answer within {self._timeout:g} s") from None
        except psycopg.Error as exc:
            await self._drop()
            raise SinkUnavailable(self._reason(exc)) from None
        except BaseException:
            await self._drop()
            raise

    async def _send(self, batch: Sequence[Delivery]) -> list[Rejected]:
        conn = self._conn
        assert conn is not None
        rows: list[tuple[Delivery, list[Value]]] = []
        refused: list[tuple[int, Rejected]] = []
        for index, delivery in enumerate(batch):
            try:
                rows.append((delivery, self._row(delivery)))
            except _RowRefused as exc:
                refused.append((index, Rejected(delivery, str(exc))))
        if rows:
            try:
                await self._write_all(conn, [row for _, row in rows])
            except (psycopg.DataError, psycopg.IntegrityError):
                refused += await self._write_each(conn, rows, batch)
        refused.sort(key=lambda item: item[0])
        return [rejected for _, rejected in refused]

    def _row(self, delivery: Delivery) -> list[Value]:
        cache: list[Any] = []
        return [extract(delivery, cache) for extract in self._extract]

    async def _write_all(self, conn: Conn, rows: list[list[Value]]) -> None:
        async with conn.transaction():
            if self.settings.insert == "copy":
                async with conn.cursor() as cursor, cursor.copy(self._copy) as copy:
                    for row in rows:
                        await copy.write_row(row)
            else:
                async with conn.cursor() as cursor:
                    await cursor.executemany(self._insert, rows)

    async def _write_each(
        self, conn: Conn, rows: list[tuple[Delivery, list[Value]]], batch: Sequence[Delivery]
    ) -> list[tuple[int, Rejected]]:
        """One transaction, each row in a savepoint: the rows the server refuses for what
        they hold are returned (with the delivery's index in `batch`); the rest commit."""
        positions = {id(delivery): index for index, delivery in enumerate(batch)}
        refused: list[tuple[int, Rejected]] = []
        async with conn.transaction():
            for delivery, row in rows:
                try:
                    async with conn.transaction():
                        await conn.execute(self._insert, row)
                except (psycopg.DataError, psycopg.IntegrityError) as exc:
                    reason = self._reason(exc, prefix=False)
                    refused.append((positions[id(delivery)], Rejected(delivery, reason)))
        return refused

    async def probe(self, sample: Delivery) -> str:
        """Insert `sample` in a transaction that is rolled back (the table is left as it
        was) and say what the server answered; SinkRejected when the row can never be
        written, SinkUnavailable when the server or the table cannot be reached."""
        await self.open()
        conn = self._conn
        assert conn is not None
        try:
            row = self._row(sample)
        except _RowRefused as exc:
            raise SinkRejected(f"{self._at}: {exc}") from None
        try:
            async with asyncio.timeout(self._timeout):
                async with conn.transaction(force_rollback=True):
                    await conn.execute(self._insert, row)
        except (psycopg.DataError, psycopg.IntegrityError) as exc:
            raise SinkRejected(self._reason(exc)) from None
        except TimeoutError:
            await self._drop()
            raise SinkUnavailable(f"{self._at}: no answer within {self._timeout:g} s") from None
        except psycopg.Error as exc:
            await self._drop()
            raise SinkUnavailable(self._reason(exc)) from None
        version = conn.info.parameter_status("server_version") or "?"
        table = self._table.as_string(conn)
        return f"PostgreSQL {version} at {self._server}: 1 row accepted by {table} (rolled back)"

    async def close(self) -> None:
        """Close the connection; idempotent."""
        await self._drop()

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            # A broken connection may fail to close: nothing is left to release then.
            with contextlib.suppress(psycopg.Error):
                await conn.close()

    def _reason(self, exc: psycopg.Error, *, prefix: bool = True) -> str:
        """One line naming the server and what it said, without the password."""
        diag = exc.diag.message_primary if exc.sqlstate else None
        text = diag or str(exc).strip()
        line = " ".join(text.split())
        if exc.sqlstate:
            line = f"{exc.sqlstate} {line}"
        if self._secret:
            line = line.replace(self._secret, "***")
        return f"{self._at}: {line}" if prefix else line
