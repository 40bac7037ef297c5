"""Kafka records of `<prefix>msg.all` as lake rows: a pure DataFrame transform.

The `mqttq` header (mqttq/storage/formats/kafka_record.py) is decoded with Spark's own
functions: the fixed fields by byte position (`substring`, `conv(hex(...))`), the two
doubles rebuilt from their IEEE 754 bits with exact arithmetic, tenant and topic checked as
UTF-8 (`is_valid_utf8`). Only the MQTT 5 properties, a variable-length TLV list, go through
a vectorised (Arrow) pandas UDF, and only records that carry properties do any work in it.

`decode_records` keeps every record: those that are not mqttq's get a `reason` (no header,
unknown header version, corrupt) and go to the quarantine, never dropped. Typed columns
come from JSON payloads through `try_parse_json` and `try_variant_get`: a payload that does
not fit its topic's schema keeps its bytes and gets `payload_typed_ok = false`.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from mqttq.lake.layout import (
    MESSAGE_COLUMNS,
    QUARANTINE_COLUMNS,
    TYPED_OK_COLUMN,
    LakeError,
    message_columns,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "TYPED_TYPES",
    "TypedSchema",
    "decode_records",
    "filter_regex",
    "message_rows",
    "parse_typed_schemas",
    "quarantine_rows",
]

HEADER: Final = "mqttq"
VERSION: Final = 1
FIXED_SIZE: Final = 21
"""version, qos, retain (1 byte each), created, expires (8-byte doubles), tenant length."""

TYPED_TYPES: Final = frozenset(
    {"string", "double", "float", "int", "bigint", "long", "boolean", "timestamp", "date"}
)
"""The Spark types a typed column may have (`[lake.schema]`, `--infer`)."""
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED: Final = frozenset(
    {name for name, _, _ in MESSAGE_COLUMNS} | {"hour", TYPED_OK_COLUMN, "reason"}
)

PROPS_SCHEMA: Final = (
    "error string, payload_format int, content_type string, response_topic string, "
    "correlation_data binary, user_properties array<struct<key:string,value:string>>"
)


_RAW: Final = ("_ktopic", "partition", "offset", "timestamp", "key", "value", "headers")
"""The Kafka source's columns `decode_records` keeps for the quarantine (`topic` renamed)."""


@dataclass(frozen=True)
class TypedSchema:
    """Typed columns for the JSON payloads of topics matching `topic_filter`: (column,
    Spark type) pairs, each column read from the payload's top-level key of that name."""

    topic_filter: str
    columns: tuple[tuple[str, str], ...]


def parse_typed_schemas(raw: object, where: str = "lake.schema") -> tuple[TypedSchema, ...]:
    """`[lake.schema]` (`{"sensors/+/temp": {"temperature": "double"}}`) as TypedSchemas;
    `LakeError` naming the key for a bad filter, column name or type."""
    if not isinstance(raw, dict):
        raise LakeError(f'{where}: must be a table of topic filters, e.g. [lake.schema."a/#"]')
    schemas: list[TypedSchema] = []
    types: dict[str, str] = {}
    for topic_filter, table in raw.items():
        key = f"{where}.{topic_filter!r}"
        filter_regex(topic_filter, key)
        if not isinstance(table, dict) or not table:
            raise LakeError(f'{key}: must be a table of column = "type"')
        columns: list[tuple[str, str]] = []
        for name, kind in table.items():
            if not _NAME.match(name) or name in _RESERVED:
                raise LakeError(
                    f"{key}.{name}: not a usable column name (a lake column or not SQL)"
                )
            kind_text = str(kind).lower()
            if kind_text not in TYPED_TYPES:
                raise LakeError(
                    f"{key}.{name}: unknown type {kind!r}; one of {', '.join(sorted(TYPED_TYPES))}"
                )
            if types.setdefault(name, kind_text) != kind_text:
                raise LakeError(
                    f"{key}.{name}: {kind_text}, but {types[name]} under another filter"
                )
            columns.append((name, kind_text))
        schemas.append(TypedSchema(topic_filter, tuple(columns)))
    return tuple(schemas)


def filter_regex(topic_filter: str, where: str = "topic filter") -> str:
    """A Java regex matching the topics `topic_filter` matches [MQTT-4.7]; `LakeError` for
    a filter that is not valid. (Wildcards at the first level do not match `$` topics.)"""
    levels = topic_filter.split("/")
    if not topic_filter or any(
        ("#" in level and (level != "#" or index != len(levels) - 1))
        or ("+" in level and level != "+")
        for index, level in enumerate(levels)
    ):
        raise LakeError(f"{where}: {topic_filter!r} is not a valid MQTT topic filter")
    # A filter starting with a wildcard does not match topics starting with "$"
    # [MQTT-4.7.2-1]; "a/#" also matches "a" [MQTT-4.7.1-2].
    head = "(?!\\$)" if levels[0] in ("+", "#") else ""
    if levels[-1] == "#":
        body = "/".join(_level_regex(level) for level in levels[:-1])
        return f"^{head}{body}(/.*)?$" if body else f"^{head}.*$"
    return f"^{head}" + "/".join(_level_regex(level) for level in levels) + "$"


def _level_regex(level: str) -> str:
    return "[^/]*" if level == "+" else re.escape(level)


def _byte(raw: Column, position: int | Column) -> Column:
    from pyspark.sql import functions as F  # noqa: PLC0415

    return F.conv(F.hex(F.substring(raw, position, 1)), 16, 10).cast("int")


def _uint16(raw: Column, position: Column | int) -> Column:
    from pyspark.sql import functions as F  # noqa: PLC0415

    return F.conv(F.hex(F.substring(raw, position, 2)), 16, 10).cast("int")


def _double(position: int) -> Column:
    """The big-endian IEEE 754 double at `position` (1-based) of the header column `_hdr`:
    NaN for NaN, null for a negative one (never written), exact otherwise (powers of two
    multiply exactly)."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    bits = F.expr(f"try_cast(conv(hex(substring(_hdr, {position}, 8)), 16, 10) as bigint)")
    exponent = F.shiftright(bits, 52).bitwiseAND(0x7FF)
    mantissa = bits.bitwiseAND((1 << 52) - 1)
    fraction = mantissa / F.lit(float(1 << 52))
    return (
        F.when(bits.isNull(), None)
        .when(exponent == 0x7FF, F.lit(float("nan")))
        .when(exponent == 0, fraction * F.pow(F.lit(2.0), F.lit(-1022)))
        .otherwise((F.lit(1.0) + fraction) * F.pow(F.lit(2.0), exponent - 1023))
    )


def _micros(seconds: Column) -> Column:
    """Unix seconds (double) as a timestamp, rounded to the microsecond half up (the same
    double arithmetic as `math.floor(seconds * 1e6 + 0.5)`)."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    return F.timestamp_micros(F.floor(seconds * F.lit(1e6) + F.lit(0.5)).cast("bigint"))


def _decode_properties_series(raw: Any) -> Any:
    """The PUBLISH properties in MQTT 5 wire form, per record (a pandas Series of bytes):
    the fields the lake keeps, or `error` naming why they do not decode (a pandas
    DataFrame, the UDF's struct). Runs on the executors' Python workers."""

    from mqttq.codec.enums import PacketType  # noqa: PLC0415
    from mqttq.codec.properties import decode_properties  # noqa: PLC0415
    from mqttq.errors import Incomplete, MqttqError  # noqa: PLC0415

    pd: Any = importlib.import_module("pandas")  # no type stubs: held as Any
    rows: list[dict[str, Any]] = []
    empty: dict[str, Any] = {
        "error": None,
        "payload_format": None,
        "content_type": None,
        "response_topic": None,
        "correlation_data": None,
        "user_properties": [],
    }
    for packed in raw:
        if packed is None or len(packed) <= 1:  # none, or a zero property length
            rows.append(empty)
            continue
        try:
            props, end = decode_properties(memoryview(packed), 0, PacketType.PUBLISH)
            if end != len(packed):
                raise ValueError("bytes after the properties")
        except (MqttqError, ValueError, IndexError) as exc:
            why = str(exc) or ("truncated" if isinstance(exc, Incomplete) else type(exc).__name__)
            rows.append({**empty, "error": f"corrupt header: properties: {why}"})
            continue
        rows.append(
            {
                "error": None,
                "payload_format": props.payload_format_indicator,
                "content_type": props.content_type,
                "response_topic": props.response_topic,
                "correlation_data": props.correlation_data,
                "user_properties": [{"key": k, "value": v} for k, v in props.user_properties],
            }
        )
    return pd.DataFrame(rows, columns=list(empty))


def decode_records(
    records: DataFrame, *, hourly: bool = False, schemas: Iterable[TypedSchema] = ()
) -> DataFrame:
    """Every Kafka record of `records` (the Kafka source's columns, headers included) with
    `reason` (null for mqttq's records) and the lake's message columns (typed ones last)."""
    from pyspark.sql import functions as F  # noqa: PLC0415
    from pyspark.sql.pandas.functions import pandas_udf  # noqa: PLC0415

    pd: Any = importlib.import_module("pandas")

    def decode_props_series(raw: Any) -> Any:
        return _decode_properties_series(raw)

    # pyspark reads the hints to pick a Series -> DataFrame (struct) UDF: real types, not
    # the strings `from __future__ import annotations` leaves.
    decode_props_series.__annotations__ = {"raw": pd.Series, "return": pd.DataFrame}
    decode_props = pandas_udf(decode_props_series, PROPS_SCHEMA)  # type: ignore[call-overload]

    hdr = F.col("_hdr")
    df = records.withColumnRenamed("topic", "_ktopic").withColumn(
        "_hdr", F.expr(f"try_element_at(filter(headers, h -> h.key = '{HEADER}'), 1).value")
    )
    tenant_length = _uint16(hdr, 20)
    df = df.select(
        "*",
        F.octet_length(hdr).alias("_len"),
        _byte(hdr, 1).alias("_version"),
        _byte(hdr, 2).alias("_qos"),
        _byte(hdr, 3).alias("_retain"),
        _double(4).alias("_created"),
        _double(12).alias("_expires"),
        tenant_length.alias("_tl"),
    )
    df = df.select(
        "*",
        _uint16(hdr, F.col("_tl") + 22).alias("_pl"),
        F.substring(hdr, F.lit(22), F.col("_tl")).cast("string").alias("_tenant"),
    )
    props_start = F.col("_tl") + F.col("_pl") + 24
    df = df.select(
        "*",
        F.substring(hdr, F.col("_tl") + 24, F.col("_pl")).cast("string").alias("_topic"),
        F.when(F.col("_len") >= props_start, F.substring(hdr, props_start, F.col("_len"))).alias(
            "_props"
        ),
    )
    df = df.withColumn("_p", decode_props(F.col("_props")))
    reason = (
        F.when(hdr.isNull(), F.lit(f"no {HEADER} header"))
        .when(F.col("_len") < FIXED_SIZE, F.lit("corrupt header: truncated"))
        .when(
            F.col("_version") != VERSION,
            F.concat(F.lit("unknown header version "), F.col("_version").cast("string")),
        )
        .when((F.col("_qos") > 2) | (F.col("_retain") > 1), F.lit("corrupt header: qos or retain"))
        .when(F.col("_len") < props_start - 1, F.lit("corrupt header: truncated"))
        .when(
            ~F.is_valid_utf8(F.col("_tenant")) | ~F.is_valid_utf8(F.col("_topic")),
            F.lit("corrupt header: tenant or topic not UTF-8"),
        )
        .when(
            F.col("_created").isNull() | F.isnan(F.col("_created")) | F.col("_expires").isNull(),
            F.lit("corrupt header: times"),
        )
        .when(F.col("_p.error").isNotNull(), F.col("_p.error"))
    )
    created = _micros(F.col("_created"))
    payload = F.coalesce(F.col("value"), F.lit(b""))
    text = payload.cast("string")
    df = df.select(
        "*",
        reason.alias("reason"),
        F.col("_tenant").alias("tenant"),
        F.date_format(created, "yyyy-MM-dd").alias("date"),
        F.hour(created).alias("hour"),
        F.col("_topic").alias("topic"),
        F.split(F.col("_topic"), "/", -1).alias("topic_levels"),
        F.coalesce(F.make_valid_utf8(F.col("key").cast("string")), F.lit("")).alias("client_id"),
        F.col("_qos").alias("qos"),
        (F.col("_retain") == 1).alias("retain"),
        created.alias("created_at"),
        F.when(~F.isnan(F.col("_expires")), _micros(F.col("_expires"))).alias("expires_at"),
        F.col("_p.content_type").alias("content_type"),
        F.col("_p.response_topic").alias("response_topic"),
        F.col("_p.correlation_data").alias("correlation_data"),
        F.col("_p.payload_format").alias("payload_format"),
        F.col("_p.user_properties").alias("user_properties"),
        payload.alias("payload"),
        F.when(F.is_valid_utf8(text), text).alias("payload_text"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
    )
    df = _typed_columns(df, tuple(schemas))
    names = [name for name, _, _ in message_columns(hourly)]
    typed = _typed_names(tuple(schemas))
    if not hourly:
        names.append("hour")  # for the quarantine split only; message_rows drops it
    return df.select("reason", *names, *typed, *([TYPED_OK_COLUMN] if typed else []), *_RAW)


def _typed_names(schemas: tuple[TypedSchema, ...]) -> list[str]:
    names: list[str] = []
    for schema in schemas:
        names += [name for name, _ in schema.columns if name not in names]
    return names


def _typed_columns(df: DataFrame, schemas: tuple[TypedSchema, ...]) -> DataFrame:
    """`df` with one column per typed name and `payload_typed_ok` (no-op without schemas)."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    if not schemas:
        return df
    df = df.withColumn("_json", F.expr("try_parse_json(payload_text)"))
    is_object = F.expr("_json is not null and schema_of_variant(_json) like 'OBJECT<%'")
    matches = [F.col("topic").rlike(filter_regex(s.topic_filter)) for s in schemas]
    values: dict[str, Column] = {}
    for schema, match in zip(schemas, matches, strict=True):
        for name, kind in schema.columns:
            value = F.expr(f"try_variant_get(_json, '$[\"{name}\"]', '{kind}')")
            values[name] = (
                F.when(match & is_object, value)
                if name not in values
                else values[name].when(match & is_object, value)
            )
    ok: Column | None = None
    for schema, match in zip(schemas, matches, strict=True):
        fits = is_object
        for name, kind in schema.columns:
            present = F.expr(f"try_variant_get(_json, '$[\"{name}\"]', 'variant')")
            typed = F.expr(f"try_variant_get(_json, '$[\"{name}\"]', '{kind}')")
            fits = fits & (present.isNull() | _is_null(present) | typed.isNotNull())
        ok = F.when(match, fits) if ok is None else ok.when(match, fits)
    assert ok is not None
    return df.select("*", *(v.alias(n) for n, v in values.items()), ok.alias(TYPED_OK_COLUMN))


def _is_null(variant: Column) -> Column:
    from pyspark.sql import functions as F  # noqa: PLC0415

    return F.coalesce(F.is_variant_null(variant), F.lit(False))


def message_rows(decoded: DataFrame, *, hourly: bool = False) -> DataFrame:
    """The lake rows of `decode_records`'s output: mqttq's records, message columns only."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    keep = [c for c in decoded.columns if c not in _RAW and c != "reason"]
    if not hourly:
        keep = [c for c in keep if c != "hour"]
    return decoded.where(F.col("reason").isNull()).select(*keep)


def quarantine_rows(decoded: DataFrame) -> DataFrame:
    """The quarantine rows of `decode_records`'s output: the records that are not mqttq's,
    with their reason and everything Kafka gave."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    names = [name for name, _, _ in QUARANTINE_COLUMNS]
    return (
        decoded.where(F.col("reason").isNotNull())
        .select(
            F.date_format(F.col("timestamp"), "yyyy-MM-dd").alias("date"),
            "reason",
            F.col("_ktopic").alias("kafka_topic"),
            F.col("partition").alias("kafka_partition"),
            F.col("offset").alias("kafka_offset"),
            F.col("timestamp").alias("kafka_timestamp"),
            "key",
            "value",
            "headers",
        )
        .select(*names)
    )
