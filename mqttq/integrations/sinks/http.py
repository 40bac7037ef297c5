"""The HTTP sink (webhook): deliveries as HTTP requests to one URL.

Three body shapes (`body`):
- "envelope" (default): one request per delivery, its body the JSON envelope
  (`record.envelope`), `Content-Type: application/json`;
- "array": one request per batch, its body a JSON array of envelopes in batch order (always
  an array, even of one delivery; the integration's `batch_size` bounds its length);
- "raw": one request per delivery, its body the payload bytes, `Content-Type` the message's
  content type or application/octet-stream, the topic and sender in `X-Mqttq-*` headers.

Answers: 2xx accepted; 3xx, 408, 429, 5xx, a timeout or a connection/TLS failure: the sink is
unavailable (the worker retries the batch); any other 4xx refuses for good: the whole batch
for "array" (`SinkRejected`), that delivery alone for one-per-delivery bodies (`Rejected`,
and the rest of the batch goes on). Requests of a batch go one after the other, in order,
over one aiohttp session whose connector holds at most `max_connections` keep-alive
connections. A worker behind its backlog sends up to `lanes` batches at once, each with
its own publishers (each publisher's order kept, not the order across publishers). Every
request carries `Idempotency-Key: <integration>:<seq>` (a range `<first>-<last>` for an
array) so that a receiver can drop a redelivery.

Secrets: `url`, `headers` and `ca_file` may hold `${NAME}`, expanded at `open`; `public()`
shows the templates with sensitive header values, URL passwords and secret-looking query
values as "***", and every reason a request fails with has the expanded secrets scrubbed.
"""

from __future__ import annotations

import base64
import re
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import aiohttp

from mqttq.errors import ConfigError
from mqttq.integrations.record import Delivery, envelope_text, envelopes_json
from mqttq.integrations.secrets import ENV_REFERENCE, expand_env, mentions_env
from mqttq.integrations.sink import Rejected, SinkRejected, SinkUnavailable

MASK: Final = "***"
BODIES: Final = ("envelope", "array", "raw")
METHODS: Final = ("POST", "PUT")
PAYLOAD_ENCODINGS: Final = ("auto", "base64")
RETRY_STATUSES: Final = frozenset({408, 429})
"""4xx answers that mean "later", not "never"."""

_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP header name (RFC 9110 token)."""
_SENSITIVE: Final = re.compile(r"auth|token|secret|key|password|passwd|cookie|signature|sig$", re.I)
"""Header or query parameter names whose values `public()` never shows."""
_RESERVED_HEADERS: Final = frozenset({"content-length", "transfer-encoding", "idempotency-key"})
_REASON_BODY_CHARS: Final = 200
LANES: Final = 4
"""Requests at once, at most, while the worker is behind its backlog (`HttpSink.lanes`)."""


@dataclass(frozen=True, slots=True)
class HttpSinkSettings:
    """The `http` sink's own keys of an `[[integration]]` table, checked; string values are
    templates (`${NAME}` unexpanded)."""

    KEYS: ClassVar[frozenset[str]] = frozenset(
        {
            "url",
            "method",
            "headers",
            "body",
            "payload_encoding",
            "timeout_ms",
            "ca_file",
            "tls_verify",
            "max_connections",
        }
    )

    url: str
    method: str = "POST"
    headers: tuple[tuple[str, str], ...] = ()
    body: str = "envelope"
    payload_encoding: str = "auto"
    timeout_ms: int = 5_000
    """The whole request (connect, send, answer) must finish within this."""
    ca_file: str | None = None
    """PEM CA certificates to verify an https server with (default: the system's)."""
    tls_verify: bool = True
    max_connections: int = 8

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str) -> HttpSinkSettings:
        """Read and check the http keys of `table`; ConfigError names `<where>.<key>`."""
        url = _string(table, "url", where, required=True)
        _check_url(url, f"{where}.url")
        method = _choice(table, "method", where, METHODS, "POST", upper=True)
        body = _choice(table, "body", where, BODIES, "envelope")
        payload_encoding = _choice(table, "payload_encoding", where, PAYLOAD_ENCODINGS, "auto")
        headers = _headers(table.get("headers", {}), f"{where}.headers")
        _check_credentials(url, [name for name, _ in headers], f"{where}.headers")
        timeout_ms = _int(table, "timeout_ms", where, 5_000, (1, 600_000))
        max_connections = _int(table, "max_connections", where, 8, (1, 1_000))
        tls_verify = table.get("tls_verify", True)
        if not isinstance(tls_verify, bool):
            raise ConfigError(f"{where}.tls_verify", f"must be true or false, got {tls_verify!r}")
        ca_file = _string(table, "ca_file", where) or None
        if ca_file is not None:
            if not tls_verify:
                raise ConfigError(f"{where}.ca_file", "is set but tls_verify is false")
            if not mentions_env(ca_file):
                _check_ca_file(ca_file, f"{where}.ca_file")
        return cls(
            url=url,
            method=method,
            headers=headers,
            body=body,
            payload_encoding=payload_encoding,
            timeout_ms=timeout_ms,
            ca_file=ca_file,
            tls_verify=tls_verify,
            max_connections=max_connections,
        )

    def public(self) -> dict[str, Any]:
        """The settings as the admin API shows them: templates, secrets as "***"."""
        return {
            "url": mask_url(self.url),
            "method": self.method,
            "headers": {name: mask_header(name, value) for name, value in self.headers},
            "body": self.body,
            "payload_encoding": self.payload_encoding,
            "timeout_ms": self.timeout_ms,
            "ca_file": self.ca_file,
            "tls_verify": self.tls_verify,
            "max_connections": self.max_connections,
        }


class HttpSink:
    """Delivers an integration's batches to a URL (see the module docstring for the rules)."""

    def __init__(self, settings: HttpSinkSettings, name: str) -> None:
        self.settings = settings
        self.name = name
        self._where = f"integration[{name}]"
        self._shown_url = mask_url(settings.url)
        self._session: aiohttp.ClientSession | None = None
        self._url = ""
        self._headers: dict[str, str] = {}
        self._content_type: str | None = None
        """The configured Content-Type header, if any (it replaces the sink's default)."""
        self._secrets: tuple[str, ...] = ()

    @property
    def lanes(self) -> int:
        """Requests the worker may have in flight at once, each with other publishers'
        deliveries (`mqttq.integrations.worker.split_lanes`): `LANES`, within
        `max_connections` (1: one request at a time, the backlog's order across
        publishers too)."""
        return min(LANES, self.settings.max_connections)

    async def open(self) -> None:
        """Expand `${NAME}`s and make the session (no connection yet: the first request
        connects). Raises ConfigError for an unset variable or an unreadable `ca_file`."""
        if self._session is not None:
            return
        settings, where = self.settings, self._where
        url = expand_env(settings.url, f"{where}.url")
        if mentions_env(settings.url):
            _check_url(url, f"{where}.url", shown="the URL after ${} expansion")
        headers = {
            name: expand_env(value, f"{where}.headers.{name}") for name, value in settings.headers
        }
        _check_credentials(url, list(headers), f"{where}.headers")
        ssl_context: ssl.SSLContext | bool = True
        if urlsplit(url).scheme.lower() == "https":
            ssl_context = _ssl_context(settings, where)
        self._secrets = _secrets_of(settings, url, headers)
        self._url = url
        self._content_type = None
        for header in [name for name in headers if name.lower() == "content-type"]:
            self._content_type = headers.pop(header)
        self._headers = {"User-Agent": "mqttq", "X-Mqttq-Integration": self.name, **headers}
        limit = settings.max_connections
        connector = aiohttp.TCPConnector(limit=limit, limit_per_host=limit, ssl=ssl_context)
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=settings.timeout_ms / 1000),
        )

    async def send(self, batch: Sequence[Delivery]) -> Sequence[Rejected]:
        """Deliver `batch` in order; returns the deliveries refused one by one."""
        if not batch:
            return []
        session = await self._opened()
        if self.settings.body == "array":
            status, reason = await self._request(session, *self._array_request(batch))
            if status is not None:
                raise SinkRejected(reason)
            return []
        rejected: list[Rejected] = []
        for delivery in batch:
            status, reason = await self._request(session, *self._single_request(delivery))
            if status is not None:
                rejected.append(Rejected(delivery, reason))
        return rejected

    async def probe(self, sample: Delivery) -> str:
        """Send `sample` as `send` would and say what the server answered, e.g.
        "HTTP 200 OK (12 ms)"; raises SinkUnavailable or SinkRejected with the reason."""
        session = await self._opened()
        if self.settings.body == "array":
            request = self._array_request((sample,))
        else:
            request = self._single_request(sample)
        started = time.perf_counter()
        status, reason = await self._request(session, *request)
        if status is not None:
            raise SinkRejected(reason)
        return f"{reason} ({round((time.perf_counter() - started) * 1000)} ms)"

    async def close(self) -> None:
        """Close the session and its connections; idempotent."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def _opened(self) -> aiohttp.ClientSession:
        if self._session is None:
            await self.open()
        assert self._session is not None
        return self._session

    def _array_request(self, batch: Sequence[Delivery]) -> tuple[bytes, dict[str, str]]:
        encoding = self.settings.payload_encoding
        body = envelopes_json(batch, payload_encoding=encoding)
        headers = {
            **self._headers,
            "Content-Type": self._content_type or "application/json",
            "Idempotency-Key": f"{self.name}:{batch[0].seq}-{batch[-1].seq}",
        }
        return body, headers

    def _single_request(self, delivery: Delivery) -> tuple[bytes, dict[str, str]]:
        headers = {**self._headers, "Idempotency-Key": f"{self.name}:{delivery.seq}"}
        if self.settings.body == "raw":
            headers["Content-Type"] = (
                delivery.content_type or self._content_type or "application/octet-stream"
            )
            headers.update(raw_headers(delivery))
            return delivery.payload, headers
        headers["Content-Type"] = self._content_type or "application/json"
        text = envelope_text(delivery, payload_encoding=self.settings.payload_encoding)
        return text.encode("utf-8"), headers

    async def _request(
        self, session: aiohttp.ClientSession, body: bytes, headers: Mapping[str, str]
    ) -> tuple[int | None, str]:
        """One request: (None, "HTTP 200 OK") when accepted, (status, reason) when refused
        for good; raises SinkUnavailable when it should be tried again."""
        method, shown = self.settings.method, self._shown_url
        try:
            async with session.request(
                method, self._url, data=body, headers=headers, allow_redirects=False
            ) as response:
                answer = await response.read()
                status, phrase = response.status, response.reason or ""
        except TimeoutError:
            raise SinkUnavailable(
                f"{method} {shown}: no answer within {self.settings.timeout_ms} ms"
            ) from None
        except aiohttp.ClientError as exc:
            raise SinkUnavailable(self._scrub(f"{method} {shown}: {_one_line(str(exc))}")) from None
        line = f"HTTP {status} {phrase}".rstrip()
        if 200 <= status < 300:
            return None, line
        # Scrubbed before it is cut, so that no prefix of a secret is left at the cut.
        detail = _one_line(self._scrub(answer.decode("utf-8", "replace")))[:_REASON_BODY_CHARS]
        reason = f"{method} {shown}: {line}" + (f": {detail}" if detail else "")
        if status < 400 or status >= 500 or status in RETRY_STATUSES:
            raise SinkUnavailable(reason)
        return status, reason

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return text


def raw_headers(delivery: Delivery) -> dict[str, str]:
    """What a raw body loses, as headers: topic (percent-encoded UTF-8), client id, tenant,
    QoS, retain and timestamp (unix ms)."""
    return {
        "X-Mqttq-Topic": quote(delivery.topic, safe="/+#$"),
        "X-Mqttq-Client-Id": quote(delivery.client_id, safe=""),
        "X-Mqttq-Tenant": quote(delivery.tenant, safe=""),
        "X-Mqttq-Qos": str(delivery.qos),
        "X-Mqttq-Retain": "true" if delivery.retain else "false",
        "X-Mqttq-Timestamp": str(delivery.timestamp_ms),
    }


def mask_header(name: str, value: str) -> str:
    """`value` as shown: "***" when the header's name looks like it carries a secret."""
    return MASK if _SENSITIVE.search(name) else value


def mask_url(url: str) -> str:
    """`url` with its password and secret-looking query values replaced by "***"."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}{':' + MASK if colon else ''}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_SENSITIVE.search(key) for key, _ in pairs):
            query = urlencode(
                [(key, MASK if _SENSITIVE.search(key) else value) for key, value in pairs],
                safe="*${}",
            )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _secrets_of(
    settings: HttpSinkSettings, url: str, headers: Mapping[str, str]
) -> tuple[str, ...]:
    """The strings no reason may contain: sensitive header values, the URL's password and
    secret query values, and whatever `${NAME}` expanded to (as a whole and each part)."""
    found: set[str] = set()
    for name, value in headers.items():
        if _SENSITIVE.search(name):
            found.add(value)
            found.update(value.split())
    parts = urlsplit(url)
    if parts.password:
        found.add(parts.password)
        # aiohttp sends them as Basic credentials, which a server may echo back.
        basic = f"{unquote(parts.username or '')}:{unquote(parts.password)}"
        found.add(base64.b64encode(basic.encode("utf-8")).decode("ascii"))
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if _SENSITIVE.search(key):
            found.add(value)
    templates = [settings.url, *(value for _, value in settings.headers)]
    for template in templates:
        for match in ENV_REFERENCE.finditer(template):
            found.add(expand_env(match.group(0), "secret"))
    # Short strings would mangle unrelated text; longest first so a part never splits a whole.
    return tuple(sorted((s for s in found if len(s) >= 4), key=len, reverse=True))


def _ssl_context(settings: HttpSinkSettings, where: str) -> ssl.SSLContext:
    if not settings.tls_verify:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if settings.ca_file is None:
        return ssl.create_default_context()
    ca_file = expand_env(settings.ca_file, f"{where}.ca_file")
    _check_ca_file(ca_file, f"{where}.ca_file")
    try:
        return ssl.create_default_context(cafile=ca_file)
    except ssl.SSLError as exc:
        raise ConfigError(f"{where}.ca_file", f"not a PEM CA certificate file: {exc}") from None


def _check_url(url: str, key: str, *, shown: str = "") -> None:
    if url.startswith("${") and not shown:
        return  # the whole URL comes from the environment: checked at open
    parts = urlsplit(url)
    what = shown or repr(mask_url(url))
    if parts.scheme.lower() not in ("http", "https"):
        raise ConfigError(key, f"must be an http:// or https:// URL, got {what}")
    if not parts.hostname:
        raise ConfigError(key, f"must name a host, got {what}")
    if not mentions_env(parts.netloc):
        try:
            parts.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError:
            raise ConfigError(key, f"has an invalid port, got {what}") from None


def _check_credentials(url: str, header_names: Sequence[str], key: str) -> None:
    """aiohttp refuses an Authorization header beside a user:password in the URL."""
    if urlsplit(url).username is None:
        return
    for name in header_names:
        if name.lower() == "authorization":
            raise ConfigError(f"{key}.{name}", "cannot be combined with a user:password in url")


def _check_ca_file(path: str, key: str) -> None:
    try:
        Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(key, f"cannot read {path!r}: {exc.strerror or exc}") from None


def _headers(raw: object, key: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, Mapping):
        raise ConfigError(key, 'must be a table of strings, e.g. {Authorization = "Bearer ..."}')
    headers: list[tuple[str, str]] = []
    for name, value in raw.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise ConfigError(key, f"{name!r} is not a valid header name")
        if name.lower() in _RESERVED_HEADERS:
            raise ConfigError(f"{key}.{name}", "is set by the sink itself")
        if not isinstance(value, str):
            raise ConfigError(f"{key}.{name}", f"must be a string, got {type(value).__name__}")
        if any(ch in value for ch in "\r\n\0"):
            raise ConfigError(f"{key}.{name}", "must not contain CR, LF or NUL")
        headers.append((name, value))
    return tuple(headers)


def _string(table: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str:
    value = table.get(key)
    if value is None:
        if required:
            raise ConfigError(f"{where}.{key}", "is required")
        return ""
    if not isinstance(value, str):
        raise ConfigError(f"{where}.{key}", f"must be a string, got {type(value).__name__}")
    return value


def _choice(
    table: Mapping[str, Any],
    key: str,
    where: str,
    choices: tuple[str, ...],
    default: str,
    *,
    upper: bool = False,
) -> str:
    value = _string(table, key, where) or default
    value = value.upper() if upper else value
    if value not in choices:
        raise ConfigError(
            f"{where}.{key}", f"must be one of {', '.join(map(repr, choices))}, got {value!r}"
        )
    return value


def _int(
    table: Mapping[str, Any], key: str, where: str, default: int, bounds: tuple[int, int]
) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}.{key}", f"must be an integer, got {value!r}")
    low, high = bounds
    if not low <= value <= high:
        raise ConfigError(f"{where}.{key}", f"must be between {low} and {high}, got {value}")
    return value


def _one_line(text: str) -> str:
    return " ".join(text.split())
