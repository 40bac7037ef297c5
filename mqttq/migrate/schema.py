"""TBMQ 1.x's PostgreSQL tables (the migration's source) and the queries that read them.

The two tables are exactly those of seed 000, section 2.2 (`\\d` output of TBMQ 1.x):
`device_session_ctx` (one row per persistent DEVICE client) and `device_publish_msg` (its
pending messages, ordered by `serial_number`), with their primary keys and the
`idx_device_publish_msg_packet_id` index. `CREATE_SOURCE` builds them for trials and tests.

The migration reads one stream of message rows ordered by (client_id, serial_number), so one
client's rows arrive together and in serial order; the session rows of the clients in each
batch are looked up by key (`SESSIONS_OF`), not joined to every message row (a join costs
PostgreSQL and the driver three more columns per row, ~1 us per row on the machine of
docs/benchmarks.md); then come the sessions that have no message at all. Both streams use the
primary keys' order, so PostgreSQL reads them from the indexes without sorting.
"""

from __future__ import annotations

from typing import Final

SESSION_TABLE: Final = "device_session_ctx"
MESSAGE_TABLE: Final = "device_publish_msg"

CREATE_SOURCE: Final = (
    """CREATE TABLE IF NOT EXISTS device_session_ctx (
    client_id character varying(255) NOT NULL,
    last_updated_time bigint NOT NULL,
    last_serial_number bigint,
    last_packet_id integer,
    CONSTRAINT device_session_ctx_pkey PRIMARY KEY (client_id)
)""",
    """CREATE TABLE IF NOT EXISTS device_publish_msg (
    client_id character varying(255) NOT NULL,
    serial_number bigint NOT NULL,
    topic character varying NOT NULL,
    time bigint NOT NULL,
    packet_id integer,
    packet_type character varying(255),
    qos integer NOT NULL,
    payload bytea NOT NULL,
    user_properties character varying,
    retain boolean,
    msg_expiry_interval integer,
    payload_format_indicator integer,
    content_type character varying(255),
    response_topic character varying(255),
    correlation_data bytea,
    CONSTRAINT device_publish_msg_pkey PRIMARY KEY (client_id, serial_number)
)""",
    """CREATE INDEX IF NOT EXISTS idx_device_publish_msg_packet_id
    ON device_publish_msg (client_id, packet_id)""",
)
"""DDL of the TBMQ 1.x source tables; idempotent (IF NOT EXISTS)."""

# Positions in a message row (MESSAGE_ROWS); the hot loop indexes tuples, not names.
CLIENT_ID: Final = 0
SERIAL: Final = 1
TOPIC: Final = 2
TIME: Final = 3
PACKET_ID: Final = 4
PACKET_TYPE: Final = 5
QOS: Final = 6
PAYLOAD: Final = 7
USER_PROPERTIES: Final = 8
RETAIN: Final = 9
EXPIRY: Final = 10
PAYLOAD_FORMAT: Final = 11
CONTENT_TYPE: Final = 12
RESPONSE_TOPIC: Final = 13
CORRELATION_DATA: Final = 14
MESSAGE_COLUMNS: Final = 15

# Positions in a session row (session_rows_query, SESSIONS_OF).
S_CLIENT_ID: Final = 0
S_SERIAL: Final = 1
S_PACKET_ID: Final = 2


def _where(column: str, pattern: bool, after: bool) -> str:
    conditions = []
    if pattern:
        conditions.append(f"{column} LIKE %(pattern)s ESCAPE '\\'")
    if after:
        conditions.append(f"{column} > %(after)s")
    return f"WHERE {' AND '.join(conditions)}" if conditions else ""


def message_rows_query(*, pattern: bool, after: bool) -> str:
    """Every message row, by client id then serial number.

    Parameters: `pattern` (SQL LIKE on client_id, `\\` escapes) and `after` (only client
    ids after it, for a resumed run) when asked for.
    """
    return f"""SELECT m.client_id, m.serial_number, m.topic, m.time, m.packet_id,
    m.packet_type, m.qos, m.payload, m.user_properties, m.retain, m.msg_expiry_interval,
    m.payload_format_indicator, m.content_type, m.response_topic, m.correlation_data
FROM device_publish_msg m
{_where("m.client_id", pattern, after)}
ORDER BY m.client_id, m.serial_number"""


SESSIONS_OF: Final = """SELECT client_id, last_serial_number, last_packet_id
FROM device_session_ctx WHERE client_id = ANY(%(client_ids)s)"""
"""The session rows of the clients in `client_ids` (a list), by primary key."""


def session_rows_query(*, pattern: bool, after: bool) -> str:
    """The session rows of clients without any message row, by client id."""
    where = _where("s.client_id", pattern, after)
    no_message = "NOT EXISTS (SELECT 1 FROM device_publish_msg m WHERE m.client_id = s.client_id)"
    where = f"{where} AND {no_message}" if where else f"WHERE {no_message}"
    return f"""SELECT s.client_id, s.last_serial_number, s.last_packet_id
FROM device_session_ctx s
{where}
ORDER BY s.client_id"""


def client_ids_query(*, pattern: bool, after: bool) -> str:
    """Every client id with a session row or a message row (no order)."""
    return f"""SELECT client_id FROM device_session_ctx {_where("client_id", pattern, after)}
UNION
SELECT client_id FROM device_publish_msg {_where("client_id", pattern, after)}"""


ESTIMATE_ROWS: Final = """SELECT c.reltuples::bigint FROM pg_class c
WHERE c.oid = to_regclass('device_publish_msg')"""
"""The planner's row estimate (no scan): for the progress bar only. -1: never analysed."""
