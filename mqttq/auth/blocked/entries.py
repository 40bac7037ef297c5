"""A blocked-client entry: what it matches (a client id, a user name, an address or CIDR,
or a regular expression over the client id or the user name), why, and until when.

`parse_entry` turns what an operator typed (CLI flags, an admin API body) into a checked
`BlockedClient`, or raises `BlockedInputError` naming the field at fault: a bad CIDR, a
regular expression that does not compile, a duration that cannot be read. The entry's `id`
is derived from its selector, so adding the same selector again replaces the entry (a new
reason or expiry) instead of adding a second one, and every node of a cluster names it the
same way (it is the key of the compacted Kafka topic).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any, Final

from mqttq.errors import MqttqError

__all__ = [
    "BODY_FIELDS",
    "KINDS",
    "REGEX_TARGETS",
    "BlockedClient",
    "BlockedInputError",
    "decode_entry",
    "encode_entry",
    "entry_from_body",
    "entry_id",
    "parse_duration",
    "parse_entry",
]

KINDS: Final = ("client_id", "username", "address", "regex")
"""What an entry matches: a client id or a user name exactly, an address (IPv4 or IPv6,
a single address or a CIDR network), or a regular expression."""
REGEX_TARGETS: Final = ("client_id", "username")
"""What a `regex` entry is matched against (`re.fullmatch`)."""
MAX_VALUE_LENGTH: Final = 65_535
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


class BlockedInputError(MqttqError):
    """An entry that cannot be stored; `field` names what is wrong (`address`, `regex`,
    `expires_in`, ...), for the admin API's 4xx and the CLI's one line."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class BlockedClient:
    """One blocked-client entry. `value` is the client id, user name, network (normalised:
    `10.0.0.0/8`, `2001:db8::/32`, a single address as `/32` or `/128`) or the pattern;
    `match_on` is what a regex is matched against (None for the other kinds). Times are
    seconds since the epoch; `expires_at` None never expires."""

    id: str
    kind: str
    value: str
    match_on: str | None
    reason: str
    created_at: float
    expires_at: float | None

    def expired(self, now: float) -> bool:
        """True once `expires_at` has passed: the entry matches nothing any more."""
        return self.expires_at is not None and self.expires_at <= now

    def to_json(self) -> dict[str, Any]:
        """The admin API's shape (and the CLI's `--json`)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "value": self.value,
            "match_on": self.match_on,
            "reason": self.reason,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
        }


def entry_id(kind: str, value: str, match_on: str | None) -> str:
    """The id of the entry with this selector: 12 hex digits of its SHA-256."""
    text = f"{kind}\x00{match_on or ''}\x00{value}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def parse_duration(text: str, field: str = "expires_in") -> float:
    """Seconds in `90`, `30s`, `15m`, `1h`, `7d`, `2w` or a sum like `1h30m`; > 0."""
    raw = text.strip().lower()
    if not raw:
        raise BlockedInputError(field, f"{field}: empty; give e.g. 30m, 1h, 7d")
    try:
        seconds = float(raw)
    except ValueError:
        pos = 0
        seconds = 0.0
        for match in _DURATION.finditer(raw):
            if match.start() != pos:
                break
            seconds += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if pos != len(raw) or pos == 0:
            raise BlockedInputError(
                field, f"{field}: {text!r} is not a duration; give e.g. 30m, 1h, 7d, 1h30m"
            ) from None
    if not seconds > 0 or seconds == float("inf"):
        raise BlockedInputError(field, f"{field}: {text!r} must be more than 0 seconds")
    return seconds


def normalise_network(text: str, field: str = "address") -> str:
    """`text` as a network in its canonical form; BlockedInputError when it is none."""
    try:
        network = ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise BlockedInputError(
            field, f"{field}: {text!r} is not an IP address or CIDR network (e.g. 10.0.0.0/8)"
        ) from None
    return str(network)


def parse_entry(
    kind: str,
    value: str,
    *,
    match_on: str | None = None,
    reason: str = "",
    expires_in: float | None = None,
    now: float,
) -> BlockedClient:
    """A checked entry (see the module docstring); `expires_in` seconds from `now`."""
    if kind not in KINDS:
        raise BlockedInputError("kind", f"kind: {kind!r} is not one of {', '.join(KINDS)}")
    if not isinstance(value, str) or not value:
        raise BlockedInputError(kind, f"{kind}: empty")
    if len(value) > MAX_VALUE_LENGTH:
        raise BlockedInputError(kind, f"{kind}: longer than {MAX_VALUE_LENGTH} characters")
    if kind == "address":
        value = normalise_network(value)
    if kind == "regex":
        match_on = match_on or "client_id"
        if match_on not in REGEX_TARGETS:
            raise BlockedInputError(
                "match_on", f"match_on: {match_on!r} is not one of {', '.join(REGEX_TARGETS)}"
            )
        try:
            re.compile(value)
        except re.error as exc:
            raise BlockedInputError("regex", f"regex: {value!r} does not compile: {exc}") from None
    elif match_on is not None:
        raise BlockedInputError("match_on", "match_on: only for a regex entry")
    if expires_in is not None and not (0 < expires_in < float("inf")):
        raise BlockedInputError("expires_in", "expires_in: must be more than 0 seconds")
    return BlockedClient(
        id=entry_id(kind, value, match_on),
        kind=kind,
        value=value,
        match_on=match_on,
        reason=reason,
        created_at=now,
        expires_at=None if expires_in is None else now + expires_in,
    )


def encode_entry(entry: BlockedClient) -> bytes:
    """The entry as stored (JSON, the API's shape)."""
    return json.dumps(entry.to_json(), separators=(",", ":")).encode()


def decode_entry(raw: bytes | str) -> BlockedClient:
    """An entry read back from a store; ValueError when it is not one."""
    try:
        body = json.loads(raw)
        expires = body["expires_at"]
        entry = BlockedClient(
            id=str(body["id"]),
            kind=str(body["kind"]),
            value=str(body["value"]),
            match_on=None if body.get("match_on") is None else str(body["match_on"]),
            reason=str(body.get("reason") or ""),
            created_at=float(body["created_at"]),
            expires_at=None if expires is None else float(expires),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a blocked-client entry: {exc}") from None
    if entry.kind not in KINDS:
        raise ValueError(f"not a blocked-client entry: kind {entry.kind!r}")
    return entry


BODY_FIELDS: Final = (*KINDS, "match_on", "reason", "expires_in")


def entry_from_body(body: dict[str, Any], *, now: float) -> BlockedClient:
    """The entry an admin API body (or the CLI's flags, as one) asks for: exactly one of
    `client_id`, `username`, `address`, `regex` (a string), with `match_on` (regex only:
    client_id, the default, or username), `reason` (a string) and `expires_in` (seconds,
    or a duration such as "1h"); BlockedInputError naming the field otherwise."""
    for name in body:
        if name not in BODY_FIELDS:
            raise BlockedInputError(
                name, f"{name}: unknown field; give one of {', '.join(BODY_FIELDS)}"
            )
    given = [kind for kind in KINDS if body.get(kind) is not None]
    if len(given) != 1:
        raise BlockedInputError(
            "client_id" if not given else given[1],
            "give exactly one of client_id, username, address, regex",
        )
    kind = given[0]
    value = body[kind]
    if not isinstance(value, str):
        raise BlockedInputError(kind, f"{kind}: must be a string")
    match_on = body.get("match_on")
    if match_on is not None and not isinstance(match_on, str):
        raise BlockedInputError("match_on", "match_on: must be a string")
    reason = body.get("reason") or ""
    if not isinstance(reason, str):
        raise BlockedInputError("reason", "reason: must be a string")
    raw = body.get("expires_in")
    expires_in: float | None
    if raw is None or raw == "":
        expires_in = None
    elif isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise BlockedInputError("expires_in", "expires_in: give seconds or a duration like 1h")
    elif isinstance(raw, str):
        expires_in = parse_duration(raw)
    else:
        expires_in = float(raw)
    return parse_entry(
        kind, value, match_on=match_on, reason=reason, expires_in=expires_in, now=now
    )
