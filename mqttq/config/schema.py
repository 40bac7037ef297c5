"""The settings tree: one frozen dataclass per section of broker.toml, with its defaults.

`mqttq.config` builds it (defaults, the TOML file, MQTTQ_* env vars, CLI flags) and
validates it; this module only says what the sections and keys are.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqttq.auth.rules import AclRule
from mqttq.limits.quota import Quota
from mqttq.protocol.connect import ConnectPolicy
from mqttq.protocol.connection import ConnectionLimits

_LIMITS = ConnectionLimits()
_POLICY = ConnectPolicy()


@dataclass(frozen=True, slots=True)
class TlsListenerSettings:
    """`[listener.tls]`: MQTT over TLS; off unless the table is present."""

    enabled: bool = False
    """True when the table is present in the file (or set explicitly)."""
    port: int = 8883
    certfile: str = ""
    """PEM file of the server certificate (and its chain)."""
    keyfile: str = ""
    """PEM file of the server's private key."""
    cafile: str = ""
    """Set: clients must present a certificate signed by one of these CAs (mTLS)."""
    min_version: str = "1.2"
    """Oldest TLS version accepted: 1.2 | 1.3."""
    identity_as_username: bool = False
    """True: the client certificate's CN is the user name (needs cafile)."""


@dataclass(frozen=True, slots=True)
class WsListenerSettings:
    """`[listener.ws]`: MQTT over WebSocket (RFC 6455, subprotocol `mqtt`); off unless
    the table is present."""

    enabled: bool = False
    port: int = 8083
    path: str = "/mqtt"
    proxy_protocol: bool = False
    """True: every connection starts with a PROXY protocol v1 or v2 header, from an
    address in `listener.proxy_trusted` (as `listener.proxy_protocol`)."""


@dataclass(frozen=True, slots=True)
class WssListenerSettings:
    """`[listener.wss]`: MQTT over WebSocket over TLS: the `[listener.tls]` keys plus
    `path`; off unless the table is present."""

    enabled: bool = False
    port: int = 8084
    path: str = "/mqtt"
    certfile: str = ""
    keyfile: str = ""
    cafile: str = ""
    min_version: str = "1.2"
    identity_as_username: bool = False


@dataclass(frozen=True, slots=True)
class ListenerSettings:
    """`[listener]`: the MQTT TCP listener, and the TLS and WebSocket ones beside it
    (`[listener.tls]`, `[listener.ws]`, `[listener.wss]`, all on `host`)."""

    host: str = "127.0.0.1"
    port: int = 1883
    reuse_port: bool = False
    """Bind every listener with SO_REUSEPORT, so that several processes share its port and
    the kernel spreads connections over them (`mqttq serve --workers` sets it)."""
    proxy_protocol: bool = False
    """True: every connection starts with a PROXY protocol v1 or v2 header (HAProxy's
    `send-proxy` / `send-proxy-v2`, a cloud balancer), and the client's address is the one
    it names. Connections from addresses outside `proxy_trusted` are refused."""
    proxy_trusted: tuple[str, ...] = ("127.0.0.1/32", "::1/128")
    """The balancers' addresses (CIDR) allowed to connect to a PROXY protocol listener."""
    proxy_header_timeout: float = 5.0
    """Seconds a connection has to send its whole PROXY header."""
    tls: TlsListenerSettings = field(default_factory=TlsListenerSettings)
    ws: WsListenerSettings = field(default_factory=WsListenerSettings)
    wss: WssListenerSettings = field(default_factory=WssListenerSettings)


@dataclass(frozen=True, slots=True)
class MqttSettings:
    """`[mqtt]`: protocol limits and the capabilities advertised in CONNACK.

    The defaults are the protocol layer's own (`ConnectionLimits`, what every connection
    enforces and announces; `ConnectPolicy`, the CONNECT negotiation), not retyped here."""

    max_keep_alive: int = _POLICY.max_keep_alive
    """Server keep alive cap in seconds; a larger (or 0) client value is replaced (5.0)."""
    receive_maximum: int = _LIMITS.receive_maximum
    """Server Receive Maximum: QoS>0 PUBLISHes a client may have unacknowledged."""
    max_packet_size: int = _LIMITS.max_packet_size
    """Largest packet accepted from a client (bytes, whole packet)."""
    topic_alias_maximum: int = _LIMITS.topic_alias_maximum
    """Topic aliases a 5.0 client may use towards the broker; 0 disables."""
    maximum_qos: int = _LIMITS.maximum_qos
    retain_available: bool = _LIMITS.retain_available
    wildcard_subscription_available: bool = _POLICY.wildcard_subscription_available
    shared_subscription_available: bool = _POLICY.shared_subscription_available
    subscription_identifier_available: bool = _POLICY.subscription_identifier_available
    max_queued_messages: int = 10_000
    """Per-session limit of the persistent queue."""
    queue_full_policy: str = "drop_oldest"
    """drop_oldest | reject_new (see storage.ports.QueueFullPolicy)."""
    queue_qos0: bool = False
    """Also queue QoS 0 messages for offline persistent sessions."""
    connect_timeout: float = _LIMITS.connect_timeout
    """Seconds a new TCP connection has to send CONNECT."""
    max_session_expiry_interval: int = _POLICY.max_session_expiry_interval
    """Cap on the Session Expiry Interval a client asks for (seconds)."""
    max_client_id_length: int = _POLICY.max_client_id_length
    allow_empty_client_id: bool = _POLICY.allow_empty_client_id
    """Assign an id to a client that sends none (5.0, and 3.1.1 with clean session)."""


@dataclass(frozen=True, slots=True)
class StorageSettings:
    """`[storage]`: where sessions, retained messages and queues live."""

    data_dir: Path = field(default_factory=lambda: Path("mqttq-data"))
    backend: str = "sqlite"
    """sqlite (durable, default) | memory (nothing survives a restart)."""
    commit_interval_ms: float = 2.0
    """Group commit: how long the writer waits to gather more writes into one commit."""
    device: str = "sqlite"
    """Where DEVICE clients' offline queues live: sqlite (the backend above) | redis."""
    log: str = "none"
    """none (embedded: routing in-process) | kafka (every PUBLISH goes through
    `<kafka.topic_prefix>msg.all`; needs `kafka.bootstrap_servers`)."""


@dataclass(frozen=True, slots=True)
class RedisSettings:
    """`[redis]`: the Redis (or Redis Cluster) holding DEVICE queues when
    `storage.device = "redis"`, in TBMQ 2.x's key layout."""

    url: str = "redis://127.0.0.1:6379/0"
    cluster: bool = False
    """True when `url` names one node of a Redis Cluster."""
    key_prefix: str = ""
    default_ttl: int = 604_800
    """Seconds a queued message lives when it carries no Message Expiry Interval (7 days)."""
    pipelining: bool = True
    """Pipeline commands of many sessions; false makes one round trip per command."""
    flush_commands: int = 5
    """With pipelining: flush after this many commands..."""
    flush_interval_ms: float = 3.0
    """...or after this many milliseconds, whichever comes first."""


@dataclass(frozen=True, slots=True)
class KafkaApplicationSettings:
    """`[kafka.application]`: APPLICATION clients' Kafka topics and consumers."""

    max_poll_records: int = 200
    """Records polled, delivered and acknowledged as one pack."""
    pack_timeout_ms: int = 20_000
    """How long a pack waits for every PUBACK / PUBCOMP before the ack strategy applies."""
    ack_strategy: str = "retry_all"
    """retry_all (re-send the unacknowledged with DUP=1) | skip_all (commit past them,
    counted in /metrics and logged with their offsets)."""
    retries: int = 3
    """retry_all: re-sends of a pack before it is skipped; 0 = no limit."""
    topic_retention_ms: int = 604_800_000
    """retention.ms of `msg.app.<client_id>` topics (7 days)."""
    topic_segment_bytes: int = 26_214_400
    """segment.bytes of `msg.app.*` topics."""
    shared_topic_partitions: int = 12
    """Partitions of `msg.app.shared.<filter>` topics."""
    high_watermark: int = 1_310_720
    """Socket write buffer bytes above which a client's consumers pause (1280 KB)."""
    low_watermark: int = 655_360
    """...and below which they resume (640 KB)."""
    flush_every: int = 10
    """Deliveries written before the socket is flushed; 1 = write-and-flush."""


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    """`[kafka]`: the Apache Kafka of the distributed mode (`storage.log = "kafka"`)."""

    bootstrap_servers: str = ""
    """host:port[,host:port...] of the Kafka brokers."""
    topic_prefix: str = "tbmq."
    """Every topic mqttq uses starts with it (`tbmq.msg.all`)."""
    produce_timeout_ms: int = 10_000
    """librdkafka delivery.timeout.ms: a produce not acknowledged in this time fails (the
    publisher is refused) instead of waiting for Kafka forever."""
    msg_all_partitions: int = 12
    """Partitions of `<prefix>msg.all` when mqttq creates it."""
    application: KafkaApplicationSettings = field(default_factory=KafkaApplicationSettings)


@dataclass(frozen=True, slots=True)
class LogSettings:
    """`[log]`: structured logs on stderr."""

    level: str = "warning"
    format: str = "json"
    """json | text."""


@dataclass(frozen=True, slots=True)
class JwtAuthSettings:
    """`[auth.jwt]`: the `jwt` provider (a signed token in the password or user name)."""

    algorithms: tuple[str, ...] = ()
    """The accepted algorithms (HS256/384/512, RS*, ES*, PS*); required; never `none`."""
    token_field: str = "password"
    """password | username: where the CONNECT carries the token."""
    secret_env: str = ""
    """HS*: the environment variable holding the shared secret."""
    public_key_file: str = ""
    """RS*/ES*/PS*: a PEM public key."""
    jwks_file: str = ""
    """RS*/ES*/PS*: a JWKS document on disk (keys chosen by the token's `kid`)."""
    jwks_url: str = ""
    """RS*/ES*/PS*: a JWKS fetched over HTTP(S), cached and refreshed."""
    jwks_refresh: float = 300.0
    """Seconds between JWKS refreshes (a token with an unknown `kid` refreshes sooner)."""
    issuer: str = ""
    """Required `iss` (empty: not checked)."""
    audience: str = ""
    """Required `aud` (empty: not checked)."""
    leeway: float = 0.0
    """Seconds of clock skew allowed on `exp` and `nbf`."""
    client_id_claim: str = "client_id"
    """When the token holds it, the CONNECT's client id must equal it."""
    username_claim: str = "sub"
    tenant_claim: str = "tenant"
    client_type_claim: str = "client_type"
    publish_claim: str = "publish_acl"
    """A list of topic filters the client may publish to (`%c`/`%u`); absent: any."""
    subscribe_claim: str = "subscribe_acl"
    """A list of topic filters the client may subscribe to (`%c`/`%u`); absent: any."""


@dataclass(frozen=True, slots=True)
class HttpAuthSettings:
    """`[auth.http]`: the `http` provider (a POST to the user's service decides)."""

    url: str = ""
    timeout: float = 5.0
    """Seconds for the whole exchange."""
    headers: tuple[str, ...] = ()
    """Extra request headers, "Name: value", `${ENV}` replaced from the environment."""
    on_error: str = "deny"
    """deny (0x87) | skip (ask the next provider): when the service times out, answers
    5xx or cannot be reached."""
    error_log_interval: float = 60.0
    """Seconds between log lines about failing calls (each with the count since)."""


@dataclass(frozen=True, slots=True)
class X509AuthSettings:
    """`[auth.x509]`: the `x509` provider (a client certificate's CN -> an x509 credential)."""

    cn_regex: str = ""
    """A regular expression over the CN with a named group `cn`: what it captures is
    matched to the credentials (empty: the whole CN)."""


@dataclass(frozen=True, slots=True)
class AuthSettings:
    """`[auth]`: who may connect, and where credentials and tenants are stored."""

    anonymous: str = "loopback"
    """always | loopback (only connections to a loopback address) | never."""
    store: str = "sqlite"
    """sqlite (auth.db in the data dir) | postgres ([postgres] url)."""
    anonymous_acl: tuple[AclRule, ...] = ()
    """`[[auth.anonymous_acl]]` rules for clients without credentials (first match wins,
    no match: denied); none: anonymous clients are unrestricted."""
    providers: tuple[str, ...] = ("credentials",)
    """The authentication providers asked, in order: jwt, http, x509, credentials (the
    blocked list is always asked first)."""
    cache_ttl: float = 60.0
    """Seconds a jwt / http / x509 decision is remembered (0: not at all)."""
    jwt: JwtAuthSettings = field(default_factory=JwtAuthSettings)
    http: HttpAuthSettings = field(default_factory=HttpAuthSettings)
    x509: X509AuthSettings = field(default_factory=X509AuthSettings)


@dataclass(frozen=True, slots=True)
class SysSettings:
    """`[sys]`: the broker's counters as retained messages on `$SYS/broker/...`."""

    interval: float = 0.0
    """Seconds between publications; 0 (the default): no `$SYS` topics."""


@dataclass(frozen=True, slots=True)
class EventsSettings:
    """`[events]`: client events (connected, disconnected, ...) as MQTT messages."""

    kinds: tuple[str, ...] = ()
    """The kinds published for MQTT subscribers: connected, disconnected, subscribed,
    unsubscribed, session_expired, message_dropped (integrations add those they take)."""
    topic: str = "$events/{kind}/{client_id}"
    """Where an event is published, in its client's tenant: `{kind}` and `{client_id}`
    are replaced."""


@dataclass(frozen=True, slots=True)
class PostgresSettings:
    """`[postgres]`: the PostgreSQL of the distributed setup (credentials, tenants)."""

    url: str = ""
    """postgresql://user:password@host:port/dbname (libpq URL)."""


@dataclass(frozen=True, slots=True)
class AdminSettings:
    """`[admin]`: the admin HTTP API (health, /metrics, sessions, tenants, credentials)."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 18083
    required: bool = False
    """False: when the port is taken, the broker starts anyway with the admin API off (and
    a warning); true: that is a start-up error."""
    token: str = ""
    """Bearer token; empty: generated once into <data_dir>/admin-token (mode 0600)."""
    max_request_rate: float = 50.0
    """Requests per second per route (URI pattern); excess waits, then gets 429."""
    session_idle_timeout: float = 43_200.0
    """Seconds a dashboard login lasts without a request (12 h); sessions live in the
    node's memory, so a restart logs everyone out."""
    sample_interval: float = 5.0
    """Seconds between the dashboard sampler's samples of the broker's counters (the last
    hour is kept)."""


@dataclass(frozen=True, slots=True)
class MqttLimitSettings:
    """`[mqtt_limit]`: how rate limits behave; `[mqtt_limit.cluster]` holds the node layer
    and `[mqtt_limit.tenant]` the quota of tenants without one of their own."""

    rate_wait_ms: float = 1000.0
    """Longest a PUBLISH or CONNECT waits for a token before it is refused."""
    burst_seconds: float = 1.0
    """Bucket size, in seconds of rate: a limit of r/s admits bursts of r x this."""
    max_tcp_connection_rate: float = 10_000.0
    """New TCP connections per second, checked before any MQTT parsing."""
    cluster: Quota = field(default_factory=Quota)
    tenant: Quota = field(default_factory=Quota)


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """`[cluster]`: this node's place among the nodes sharing `[kafka]`, `[redis]` and
    `[postgres]` (distributed mode, `storage.log = "kafka"`)."""

    node_id: str = ""
    """Unique among the nodes; names this node's Kafka topics and Redis keys. Empty: derived
    from the host name and the MQTT port (`node_id_of`)."""
    heartbeat_interval_ms: int = 2_000
    """How often this node says it is alive; a node silent for 3 intervals is gone."""


def node_id_of(settings: Settings) -> str:
    """The node id: `[cluster] node_id`, or `<host name>-<MQTT port>` when it is empty
    (`<host name>-pid<pid>` on port 0, which two nodes of one host may both be given;
    characters Kafka topic names cannot hold become `-`)."""
    if settings.cluster.node_id:
        return settings.cluster.node_id
    port = settings.listener.port
    raw = f"{socket.gethostname()}-{port if port else f'pid{os.getpid()}'}"
    return "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "-" for c in raw)


@dataclass(frozen=True, slots=True)
class BlockedSettings:
    """`[blocked]`: blocked clients (`mqttq blocked`) and the failed-connections log."""

    failed_connections: int = 1000
    """Refused CONNECTs kept in memory: the last ones of any client, and the latest of
    each of as many client ids; 0 keeps none."""
    purge_interval: float = 60.0
    """Seconds between purges of expired entries (they match nothing from the moment
    they expire)."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Every setting of one broker process; built by `load_settings`, never mutated."""

    listener: ListenerSettings = field(default_factory=ListenerSettings)
    mqtt: MqttSettings = field(default_factory=MqttSettings)
    storage: StorageSettings = field(default_factory=StorageSettings)
    redis: RedisSettings = field(default_factory=RedisSettings)
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    log: LogSettings = field(default_factory=LogSettings)
    auth: AuthSettings = field(default_factory=AuthSettings)
    postgres: PostgresSettings = field(default_factory=PostgresSettings)
    admin: AdminSettings = field(default_factory=AdminSettings)
    mqtt_limit: MqttLimitSettings = field(default_factory=MqttLimitSettings)
    sys: SysSettings = field(default_factory=SysSettings)
    events: EventsSettings = field(default_factory=EventsSettings)
    blocked: BlockedSettings = field(default_factory=BlockedSettings)
    integration: tuple[dict[str, Any], ...] = ()
    """The `[[integration]]` tables of the file, as given: the composition root checks
    them with `mqttq.integrations.spec.parse_integrations` at start (the integrations
    package sits above this one), naming `integration[N].<key>` on a mistake."""
    lake: dict[str, Any] = field(default_factory=dict)
    """The `[lake]` table as given (`[lake.schema."<filter>"]` typed columns): checked by
    `mqttq.lake.decode.parse_typed_schemas` when `mqttq lake run` starts; the broker
    ignores it."""
