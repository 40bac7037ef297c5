"""The `kafka` sink: each delivery becomes one record on an external Kafka cluster.

- The record's topic comes from a template (`iot.{tenant}.{topic_level_1}`), its key from the
  publisher's client id (or a topic level, the whole topic, or none), its value is the JSON
  envelope (`record.envelope`) or the raw payload, and the MQTT properties travel as record
  headers. The record's timestamp is when the broker accepted the message.
- The producer is idempotent with acks=all (the default): within one producer, a record is
  written once and in order per partition, and records with one key share a partition, so
  one publisher's messages keep their order (per key). A redelivered batch (at least once)
  is written again: the `mqttq.integration` and `mqttq.seq` headers tell a duplicate.
- `send` produces the whole batch, then waits (on the event loop, never blocking it) for
  every delivery report, which a thread of the sink's own polls from librdkafka.
- Transient failures (no broker, timeout, full queue, a fatal producer error) raise
  `SinkUnavailable`: the worker retries the batch. Failures that retrying cannot cure, for
  one record (too large, topic authorization failed, invalid or missing topic), are
  returned as `Rejected`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import string
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Final

import confluent_kafka

from mqttq.errors import ConfigError
from mqttq.integrations.record import ENVELOPE_FIELDS, Delivery, envelope_text
from mqttq.integrations.secrets import expand_env
from mqttq.integrations.sink import Rejected, SinkRejected, SinkUnavailable

__all__ = ["KafkaSink", "KafkaSinkSettings"]

_LIBRDKAFKA_LOG: Final = logging.getLogger("mqttq.integrations.librdkafka")

TEMPLATE_FIELDS: Final = ("topic", "client_id", "tenant", "content_type", "response_topic")
"""Envelope fields a topic template may name (plus `topic_level_N`): the string ones that
can be part of a topic name (not the payload, its encoding or the correlation data)."""

_TOPIC_LEVEL: Final = re.compile(r"topic_level_([1-9][0-9]*)")
_KAFKA_TOPIC: Final = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_SERVER: Final = re.compile(r"[^\s,:]+:([0-9]{1,5})")

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
COMPRESSIONS: Final = ("none", "gzip", "snappy", "lz4", "zstd")
_ACKS: Final[Mapping[object, str]] = {"all": "all", "-1": "all", -1: "all", "1": "1", 1: "1"}
_ACKS_ZERO: Final[Mapping[object, str]] = {"0": "0", 0: "0"}

_PERMANENT: Final = frozenset(
    {
        confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE,
        confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED,
        confluent_kafka.KafkaError.TOPIC_EXCEPTION,
        confluent_kafka.KafkaError._UNKNOWN_TOPIC,
        confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART,
        confluent_kafka.KafkaError.INVALID_RECORD,
        confluent_kafka.KafkaError.POLICY_VIOLATION,
        confluent_kafka.KafkaError._INVALID_ARG,
    }
)
"""Errors about one record that a retry cannot cure: the record is rejected (dead-lettered).
Everything else (timeouts, brokers down, authentication, a fatal producer) is transient: a
problem of the sink as a whole, retried until an operator fixes it, nothing dead-lettered."""

_SECURITY_PROPERTIES: Final = {
    "sasl_mechanism": "sasl.mechanism",
    "sasl_username": "sasl.username",
    "sasl_password": "sasl.password",
    "ssl_ca_location": "ssl.ca.location",
    "ssl_certificate_location": "ssl.certificate.location",
    "ssl_key_location": "ssl.key.location",
    "ssl_key_password": "ssl.key.password",
}
"""The settings passed to librdkafka as they are, by their librdkafka property."""

_LINGER_MS: Final = 5
"""librdkafka's `linger.ms`: how long the producer gathers records into a request."""
_POLL_SECONDS: Final = 0.05
"""How long the poll thread blocks per call (also bounds how long `close` waits for it)."""
_REPORT_GRACE_SECONDS: Final = 5.0
"""How much longer than `timeout_ms` `send` waits for delivery reports before giving up."""


_RENDERED_KEPT: Final = 4096
"""Rendered topics remembered per template, at most (forgotten all at once past that)."""


class _Template:
    """A compiled topic template: literal text and the delivery fields between it."""

    def __init__(self, text: str, where: str) -> None:
        self.text = text
        self._parts: list[str | Callable[[Delivery], str]] = []
        self._names: list[str] = []
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError as exc:
            raise ConfigError(where, f"is not a valid template ({exc}): {text!r}") from None
        for literal, name, spec, conversion in parsed:
            if literal:
                self._parts.append(literal)
            if name is None:
                continue
            if spec or conversion:
                raise ConfigError(where, f"field {{{name}}} takes no format spec or conversion")
            self._parts.append(_field_getter(name, where))
            self._names.append(name)
        self.constant: str | None = (
            "".join(p for p in self._parts if isinstance(p, str))
            if all(isinstance(p, str) for p in self._parts)
            else None
        )
        """The topic of every delivery when the template names no field."""
        self._topic_only = all(
            name == "topic" or _TOPIC_LEVEL.fullmatch(name) for name in self._names
        )
        """The template names only the MQTT topic and its levels."""
        self._by_topic: dict[str, str] = {}

    def render(self, delivery: Delivery) -> str:
        """The template with each field replaced by the delivery's value ("" when absent)."""
        return "".join(part if isinstance(part, str) else part(delivery) for part in self._parts)

    def topics(self, batch: Sequence[Delivery]) -> list[str]:
        """The rendered template of each delivery of `batch`. A template naming only the
        topic and its levels is rendered once per MQTT topic (remembered, `_by_topic`)."""
        if self.constant is not None:
            return [self.constant] * len(batch)
        if not self._topic_only:
            return [self.render(delivery) for delivery in batch]
        known = self._by_topic
        out = []
        for delivery in batch:
            topic = known.get(delivery.topic)
            if topic is None:
                if len(known) >= _RENDERED_KEPT:
                    known.clear()
                topic = known[delivery.topic] = self.render(delivery)
            out.append(topic)
        return out


def _field_getter(name: str, where: str) -> Callable[[Delivery], str]:
    level = _TOPIC_LEVEL.fullmatch(name)
    if level is not None:
        return functools.partial(_topic_level, int(level.group(1)))
    if name in TEMPLATE_FIELDS:
        return functools.partial(_attribute, name)
    allowed = ", ".join(TEMPLATE_FIELDS) + " or topic_level_N"
    if name in ENVELOPE_FIELDS:
        raise ConfigError(where, f"field {{{name}}} cannot be part of a topic name; use {allowed}")
    raise ConfigError(where, f"unknown field {{{name}}}; use {allowed}")


def _topic_level(index: int, delivery: Delivery) -> str:
    return delivery.topic_level(index)


def _attribute(name: str, delivery: Delivery) -> str:
    value = getattr(delivery, name)
    return "" if value is None else str(value)


@dataclass(frozen=True, slots=True)
class KafkaSinkSettings:
    """The `kafka` sink's own keys of an `[[integration]]` table, validated.

    String settings are kept as written: `${NAME}` references are expanded from the
    environment only when the sink opens (`sasl_password = "${KAFKA_PASSWORD}"`).
    """

    KEYS: ClassVar[frozenset[str]] = frozenset(
        {
            "bootstrap_servers",
            "topic",
            "key",
            "value",
            "payload_encoding",
            "headers",
            "security_protocol",
            "sasl_mechanism",
            "sasl_username",
            "sasl_password",
            "ssl_ca_location",
            "ssl_certificate_location",
            "ssl_key_location",
            "ssl_key_password",
            "acks",
            "compression",
            "timeout_ms",
            "max_message_bytes",
            "auto_create_topics",
        }
    )
    SECRETS: ClassVar[frozenset[str]] = frozenset({"sasl_password", "ssl_key_password"})

    bootstrap_servers: str
    """`host:port[,host:port...]`: where the producer finds the cluster."""
    topic: str
    """The topic template, e.g. `iot.{tenant}.{topic_level_1}`."""
    key: str = "client_id"
    """`client_id`, `topic`, `topic_level_N` or `none` (no key: records spread)."""
    value: str = "envelope"
    """`envelope` (the JSON object of `record.envelope`) or `raw` (the payload bytes)."""
    payload_encoding: str = "auto"
    """In the envelope: `auto` (UTF-8 text, else base64) or `base64` (always)."""
    headers: bool = True
    """Write the MQTT properties as record headers."""
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = None
    acks: str = "all"
    """`all` (idempotent producer), `1` or `0` (both without idempotence)."""
    compression: str = "none"
    timeout_ms: int = 30_000
    """How long a record may take to be acknowledged before `send` says unavailable."""
    max_message_bytes: int = 1_000_000
    """Largest record (and record batch) the producer sends; a larger record is rejected.
    Keep it at most the topics' `max.message.bytes`."""
    auto_create_topics: bool = True
    """Ask the cluster to create a missing topic (the brokers' auto.create.topics.enable
    must allow it too); when off, a record for a missing topic is rejected."""

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str) -> KafkaSinkSettings:
        """The settings from an `[[integration]]` table (other keys are ignored); raises
        `ConfigError` naming `<where>.<key>` and the problem."""

        def at(key: str) -> str:
            return f"{where}.{key}"

        def text(key: str, required: bool = False) -> str | None:
            value = table.get(key)
            if value is None:
                if required:
                    raise ConfigError(at(key), "is required")
                return None
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(at(key), f"must be a non-empty string, got {value!r}")
            return value

        def choice(key: str, options: Sequence[str], default: str, upper: bool = False) -> str:
            value = text(key)
            if value is None:
                return default
            wanted = value.upper() if upper else value.lower()
            if wanted not in options:
                raise ConfigError(at(key), f"must be one of {', '.join(options)}, got {value!r}")
            return wanted

        def flag(key: str, default: bool) -> bool:
            value = table.get(key, default)
            if not isinstance(value, bool):
                raise ConfigError(at(key), f"must be true or false, got {value!r}")
            return value

        def integer(key: str, default: int, low: int, high: int) -> int:
            value = table.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigError(
                    at(key), f"must be an integer from {low} to {high}, got {value!r}"
                )
            return value

        servers = text("bootstrap_servers", required=True)
        assert servers is not None
        _check_servers(servers, at("bootstrap_servers"))
        topic = text("topic", required=True)
        assert topic is not None
        _Template(topic, at("topic"))
        key = text("key") or "client_id"
        if key not in ("client_id", "topic", "none") and not _TOPIC_LEVEL.fullmatch(key):
            raise ConfigError(
                at("key"), f"must be client_id, topic, topic_level_N or none, got {key!r}"
            )
        acks_raw = table.get("acks", "all")
        acks = _ACKS.get(acks_raw) or _ACKS_ZERO.get(acks_raw)
        if acks is None or isinstance(acks_raw, bool):
            raise ConfigError(at("acks"), f"must be all, 1 or 0, got {acks_raw!r}")

        protocol = choice("security_protocol", SECURITY_PROTOCOLS, "PLAINTEXT", upper=True)
        sasl = protocol.startswith("SASL_")
        mechanism = choice("sasl_mechanism", SASL_MECHANISMS, "", upper=True) or None
        settings = cls(
            bootstrap_servers=servers,
            topic=topic,
            key=key,
            value=choice("value", ("envelope", "raw"), "envelope"),
            payload_encoding=choice("payload_encoding", ("auto", "base64"), "auto"),
            headers=flag("headers", True),
            security_protocol=protocol,
            sasl_mechanism=mechanism,
            sasl_username=text("sasl_username"),
            sasl_password=text("sasl_password"),
            ssl_ca_location=text("ssl_ca_location"),
            ssl_certificate_location=text("ssl_certificate_location"),
            ssl_key_location=text("ssl_key_location"),
            ssl_key_password=text("ssl_key_password"),
            acks=acks,
            compression=choice("compression", COMPRESSIONS, "none"),
            timeout_ms=integer("timeout_ms", 30_000, 100, 3_600_000),
            max_message_bytes=integer("max_message_bytes", 1_000_000, 1_000, 1_000_000_000),
            auto_create_topics=flag("auto_create_topics", True),
        )
        for name in ("sasl_mechanism", "sasl_username", "sasl_password"):
            if sasl and getattr(settings, name) is None:
                raise ConfigError(at(name), f"is required with security_protocol {protocol}")
            if not sasl and getattr(settings, name) is not None:
                raise ConfigError(
                    at(name), "is only used with security_protocol SASL_PLAINTEXT or SASL_SSL"
                )
        if not protocol.endswith("SSL"):
            for name in ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location"):
                if getattr(settings, name) is not None:
                    raise ConfigError(
                        at(name), "is only used with security_protocol SSL or SASL_SSL"
                    )
        if settings.ssl_key_password is not None and settings.ssl_key_location is None:
            raise ConfigError(at("ssl_key_password"), "is only used with ssl_key_location")
        if (settings.ssl_certificate_location is None) != (settings.ssl_key_location is None):
            missing = (
                "ssl_key_location"
                if settings.ssl_key_location is None
                else ("ssl_certificate_location")
            )
            raise ConfigError(at(missing), "is required for a client certificate (both or none)")
        return settings

    def public(self) -> dict[str, Any]:
        """The settings as the admin API shows them: templates as written, secrets "***"."""
        shown: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name in self.SECRETS and value is not None:
                value = "***"
            shown[item.name] = value
        return shown


def _check_servers(servers: str, where: str) -> None:
    if "${" in servers:
        return  # checked once expanded, at open
    for server in servers.split(","):
        match = _SERVER.fullmatch(server.strip())
        if match is None or not 0 < int(match.group(1)) < 65536:
            raise ConfigError(where, f"must be host:port[,host:port...], got {servers!r}")


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What librdkafka reported for one record: an error, or where it was written."""

    error: Any = None
    topic: str = ""
    partition: int = -1
    offset: int = -1


class _Pending:
    """The delivery reports of one batch, counted up to a future on the event loop.

    `report` runs on the poll thread (the only writer of `reported`), `produced` on the
    event loop thread (the only writer of `expected`): no lock. Each side checks after its
    own write, so whichever comes second sees both and resolves `done` (twice is harmless).
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, size: int, *, where_written: bool = False
    ) -> None:
        """`where_written`: note each record's topic, partition and offset (a probe's
        answer); else a record written leaves its outcome None (one report per record:
        the poll thread does no more than count it)."""
        self.outcomes: list[_Outcome | None] = [None] * size
        self.done: asyncio.Future[None] = loop.create_future()
        self._loop = loop
        self._size = size
        self.reported = 0
        self.expected = -1
        """Reports to wait for; -1 until every record of the batch was handed over."""
        self._where_written = where_written

    def report(self, index: int, error: Any, message: Any) -> None:
        if error is not None:
            self.outcomes[index] = _Outcome(error)
        elif self._where_written:
            self.outcomes[index] = _Outcome(
                None, message.topic(), message.partition(), message.offset()
            )
        self.reported += 1
        if self.reported == self.expected:
            # RuntimeError: the loop closed, nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(_resolve, self.done)

    def produced(self, skipped: int) -> None:
        """Every record was produced, except `skipped` (rejected or never handed over)."""
        self.expected = self._size - skipped
        if self.reported >= self.expected:
            _resolve(self.done)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class KafkaSink:
    """Delivers batches as records to a Kafka cluster (see the module docstring)."""

    batches_in_flight: ClassVar[int] = 3
    """The worker may have this many `send` calls under way at once: the next batch is
    produced while librdkafka still waits for the acknowledgements of the earlier ones
    (the producer keeps their order, as within one batch; see `IntegrationWorker`)."""

    def __init__(self, settings: KafkaSinkSettings, name: str) -> None:
        self.settings = settings
        self.name = name
        self._where = f"integration[{name}]"
        self._template = _Template(settings.topic, f"{self._where}.topic")
        self._key = _key_function(settings.key)
        self._producer: confluent_kafka.Producer | None = None
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()
        self._fatal: str | None = None
        self._secrets: tuple[str, ...] = ()
        self._integration_header = ("mqttq.integration", name.encode())
        self._common_headers: dict[
            tuple[str, str, int, bool, str], tuple[tuple[str, bytes], ...]
        ] = {}
        """The first five headers by (topic, client_id, qos, retain, tenant) (`_headers`)."""
        self._valid_topics: set[str] = set()
        """Topic names checked valid lately (`_valid_topic`)."""

    async def open(self) -> None:
        """Create the producer (it connects in the background: a cluster that is down shows
        up as `SinkUnavailable` from `send`). Raises `ConfigError` naming the key for an
        unset `${NAME}` or a setting librdkafka refuses (e.g. a missing CA file)."""
        if self._producer is not None:
            return
        config = self._config()
        try:
            producer = confluent_kafka.Producer(config)
        except confluent_kafka.KafkaException as exc:
            error = exc.args[0] if exc.args else exc
            text = error.str() if isinstance(error, confluent_kafka.KafkaError) else str(exc)
            where = self._where
            for key, property_name in _SECURITY_PROPERTIES.items():
                if property_name in text:
                    where = f"{where}.{key}"
                    break
            raise ConfigError(where, self._scrub(f"Kafka refused it: {text}")) from None
        self._producer = producer
        self._fatal = None
        self._closing = threading.Event()
        self._thread = threading.Thread(
            target=_poll,
            args=(producer, self._closing),
            name=f"mqttq-sink-kafka-{self.name}",
            daemon=True,
        )
        self._thread.start()

    def _config(self) -> dict[str, Any]:
        settings = self.settings

        def expanded(key: str) -> str | None:
            value = getattr(settings, key)
            return None if value is None else expand_env(value, f"{self._where}.{key}")

        servers = expanded("bootstrap_servers") or ""
        _check_servers(servers, f"{self._where}.bootstrap_servers")
        timeout = settings.timeout_ms
        idempotent = settings.acks == "all"
        config: dict[str, Any] = {
            "bootstrap.servers": servers,
            "client.id": f"mqttq-integration-{self.name}",
            "logger": _LIBRDKAFKA_LOG,
            # Only critical lines: a cluster that is down surfaces as SinkUnavailable with
            # the reason, not as a "Connect failed" log line per retry.
            "log_level": 2,
            "acks": settings.acks,
            "enable.idempotence": idempotent,
            "message.timeout.ms": timeout,
            # A request must time out before the record does, or librdkafka refuses.
            "request.timeout.ms": min(30_000, max(1, timeout - 1)),
            "message.max.bytes": settings.max_message_bytes,
            "compression.type": settings.compression,
            # With batches in flight, the producer's requests carry more records each the
            # longer it lingers: at 5 ms librdkafka's threads spend about half the CPU a
            # record of 1 ms (fewer, larger requests and wake-ups), while the batches in
            # flight keep the wait off the rate (one batch at a time, 5 ms halved it).
            "linger.ms": _LINGER_MS,
            # Nagle off: with requests in flight, a small one waits for the ACK of the one
            # before it (up to a delayed ACK's 40 ms); measured, the rate rose by a third.
            "socket.nagle.disable": True,
            "allow.auto.create.topics": settings.auto_create_topics,
            # A missing topic fails its records well before they time out (then Rejected).
            "topic.metadata.propagation.max.ms": max(1, min(30_000, timeout // 2)),
            # The Java client's partitioner: a key lands on the partition Java would pick.
            "partitioner": "murmur2_random",
            "security.protocol": settings.security_protocol.lower(),
            "error_cb": self._on_error,
        }
        if not idempotent:
            config["max.in.flight.requests.per.connection"] = 1  # retries keep the order
        secrets: list[str] = []
        for key, property_name in _SECURITY_PROPERTIES.items():
            value = expanded(key)
            if value is not None:
                config[property_name] = value
                if key in KafkaSinkSettings.SECRETS:
                    secrets.append(value)
        self._secrets = tuple(secret for secret in secrets if secret)
        return config

    def _on_error(self, error: Any) -> None:  # on the poll thread
        if error.fatal():
            self._fatal = f"kafka: fatal producer error: {error.str()}"

    async def send(self, batch: Sequence[Delivery]) -> Sequence[Rejected]:
        """Produce `batch` in order and wait for every delivery report; the records refused
        for good come back as `Rejected`. Raises `SinkUnavailable` when any record was not
        confirmed for a transient reason (the whole batch is then sent again)."""
        rejected, _ = await self._deliver(batch, where_written=False)
        return rejected

    async def probe(self, sample: Delivery) -> str:
        """Produce `sample` and say where Kafka wrote it: `kafka: written to
        <topic>[<partition>]@<offset> (acks=all)`."""
        rejected, outcomes = await self._deliver([sample], where_written=True)
        if rejected:
            raise SinkRejected(rejected[0].reason)
        written = outcomes[0]
        return (
            f"kafka: written to {written.topic}[{written.partition}]@{written.offset} "
            f"(acks={self.settings.acks})"
        )

    async def _deliver(
        self, batch: Sequence[Delivery], *, where_written: bool
    ) -> tuple[list[Rejected], list[_Outcome]]:
        await self.open()
        producer = self._producer
        assert producer is not None
        settings = self.settings
        pending = _Pending(asyncio.get_running_loop(), len(batch), where_written=where_written)
        refused: dict[int, str] = {}
        transient: str | None = None
        skipped = 0
        topics = self._template.topics(batch)
        valid = self._valid_topics
        produce = producer.produce
        key_of = self._key
        raw = settings.value == "raw"
        encoding = settings.payload_encoding
        headers_of = self._headers if settings.headers else _no_headers
        report = pending.report
        partial = functools.partial
        for index, delivery in enumerate(batch):
            topic = topics[index]
            if topic not in valid and not _valid_topic(topic, valid):
                refused[index] = (
                    f"kafka: {topic!r} is not a valid topic name (letters, digits, '.', '_', "
                    "'-', at most 249)"
                )
                skipped += 1
                continue
            value = (
                delivery.payload
                if raw
                else envelope_text(delivery, payload_encoding=encoding).encode()
            )
            try:
                # Positional, in the C signature's order (topic, value, key, partition,
                # on_delivery, its alias callback, timestamp, headers): parsing keywords
                # cost 0.4 of 1.7 us a record. test_sink_kafka checks the timestamps and
                # headers that land.
                produce(
                    topic,
                    value,
                    key_of(delivery),
                    -1,  # the partitioner's choice
                    partial(report, index),
                    None,
                    delivery.timestamp_ms,
                    headers_of(delivery),
                )
            except BufferError:
                transient = "kafka: the producer's queue is full (the cluster is slow or down)"
            except confluent_kafka.KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if isinstance(error, confluent_kafka.KafkaError) and error.code() in _PERMANENT:
                    refused[index] = _reason(topic, error)
                    skipped += 1
                    continue
                transient = f"kafka: cannot produce to {topic!r}: {exc}"
            if transient is not None:
                skipped += len(batch) - index
                break
        pending.produced(skipped)
        if transient is None:
            try:
                async with asyncio.timeout(settings.timeout_ms / 1000 + _REPORT_GRACE_SECONDS):
                    await asyncio.shield(pending.done)
            except TimeoutError:
                transient = f"kafka: no delivery report within {settings.timeout_ms} ms"
        written = _Outcome(None)
        outcomes = [written if reported is None else reported for reported in pending.outcomes]
        for index, reported in enumerate(pending.outcomes):
            if reported is None or reported.error is None:
                continue
            if reported.error.code() in _PERMANENT:
                refused[index] = _reason(topics[index], reported.error)
            elif transient is None:
                transient = _reason(topics[index], reported.error)
        if self._fatal is not None:
            transient = self._fatal
            await self._discard()  # a fenced idempotent producer: the next send opens anew
        if transient is not None:
            raise SinkUnavailable(self._scrub(transient))
        rejected = [Rejected(batch[i], self._scrub(refused[i])) for i in sorted(refused)]
        return rejected, outcomes

    def _headers(self, delivery: Delivery) -> list[tuple[str, str | bytes | None]]:
        """The record's headers: the MQTT properties it has, then the integration's name
        and the delivery's `seq`, its `extra` and its user properties, in that order. The
        first five (topic, QoS, retain, publisher, tenant) are the same for a publisher's
        messages on one topic: built once and shared (`_common_headers`)."""
        common_key = (
            delivery.topic,
            delivery.client_id,
            delivery.qos,
            delivery.retain,
            delivery.tenant,
        )
        common = self._common_headers.get(common_key)
        if common is None:
            common = self._remember_common(common_key)
        seq = ("mqttq.seq", b"%d" % delivery.seq)
        if (
            delivery.content_type is None
            and delivery.response_topic is None
            and delivery.correlation_data is None
            and delivery.message_expiry_interval is None
            and not delivery.extra
            and not delivery.user_properties
        ):
            return [*common, self._integration_header, seq]
        headers: list[tuple[str, str | bytes | None]] = list(common)
        if delivery.content_type is not None:
            headers.append(("mqtt.content_type", delivery.content_type.encode()))
        if delivery.response_topic is not None:
            headers.append(("mqtt.response_topic", delivery.response_topic.encode()))
        if delivery.correlation_data is not None:
            headers.append(("mqtt.correlation_data", delivery.correlation_data))
        if delivery.message_expiry_interval is not None:
            headers.append(
                ("mqtt.message_expiry_interval", str(delivery.message_expiry_interval).encode())
            )
        headers.append(self._integration_header)
        headers.append(seq)
        for name, value in delivery.extra.items():
            headers.append((f"mqttq.{name}", value.encode()))
        headers.extend((name, value.encode()) for name, value in delivery.user_properties)
        return headers

    def _remember_common(
        self, key: tuple[str, str, int, bool, str]
    ) -> tuple[tuple[str, bytes], ...]:
        topic, client_id, qos, retain, tenant = key
        common = (
            ("mqtt.topic", topic.encode()),
            ("mqtt.qos", str(qos).encode()),
            ("mqtt.retain", b"true" if retain else b"false"),
            ("mqtt.client_id", client_id.encode()),
            ("mqtt.tenant", tenant.encode()),
        )
        if len(self._common_headers) >= _COMMON_HEADERS_KEPT:
            self._common_headers.clear()
        self._common_headers[key] = common
        return common

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return " ".join(text.split())

    async def _discard(self) -> None:
        producer, thread = self._producer, self._thread
        self._producer = self._thread = None
        if producer is None:
            return
        self._closing.set()
        producer.purge()
        if thread is not None:
            await asyncio.to_thread(thread.join, 10 * _POLL_SECONDS + 5.0)

    async def close(self) -> None:
        """Stop the producer: records not yet acknowledged are purged (their `send` raises
        `SinkUnavailable`, and the worker sends them again). Idempotent."""
        await self._discard()


_COMMON_HEADERS_KEPT: Final = 4096
"""Publisher-and-topic header sets remembered per sink, at most (then forgotten at once)."""

_VALID_TOPICS_KEPT: Final = 4096
"""Valid topic names remembered per sink, at most (forgotten all at once past that)."""


def _valid_topic(topic: str, valid: set[str]) -> bool:
    """Whether `topic` is a name Kafka takes; a valid one is added to `valid` (a template
    naming no field, or a few, renders the same names again and again)."""
    if not _KAFKA_TOPIC.fullmatch(topic) or topic in (".", ".."):
        return False
    if len(valid) >= _VALID_TOPICS_KEPT:
        valid.clear()
    valid.add(topic)
    return True


def _poll(producer: confluent_kafka.Producer, closing: threading.Event) -> None:
    # Delivery reports and error callbacks are served here, never on the event loop.
    while not closing.is_set():
        producer.poll(_POLL_SECONDS)
    producer.poll(0)  # the reports of what `purge` failed


def _key_function(key: str) -> Callable[[Delivery], bytes | None]:
    if key == "none":
        return _no_key
    if key == "topic":
        return _topic_key
    level = _TOPIC_LEVEL.fullmatch(key)
    if level is not None:
        return functools.partial(_level_key, int(level.group(1)))
    return _client_id_key


def _no_headers(_delivery: Delivery) -> None:
    return None


def _no_key(_delivery: Delivery) -> None:
    return None


def _topic_key(delivery: Delivery) -> bytes:
    return delivery.topic.encode()


def _client_id_key(delivery: Delivery) -> bytes:
    return delivery.client_id.encode()


def _level_key(index: int, delivery: Delivery) -> bytes:
    return delivery.topic_level(index).encode()


def _reason(topic: str, error: Any) -> str:
    return f"kafka: topic {topic!r}: {error.str()} ({error.name()})"
