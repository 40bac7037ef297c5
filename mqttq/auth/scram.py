"""SCRAM (RFC 5802, RFC 7677): the math, the messages and one server-side exchange.

No I/O and no clock. The broker keeps, per user and mechanism, a `ScramSecret`: the salt,
the iteration count, StoredKey = H(ClientKey) and ServerKey, never the password nor
SaltedPassword, so a stolen store cannot be replayed as a password. `ScramServer` runs
one exchange: client-first-message in, server-first-message out, client-final-message
in, server-final-message out (or `ScramError`).

What is supported, and what is refused with a clear `ScramError`:
- GS2 header "n,," only (no channel binding: MQTT over TCP/TLS offers none to bind to,
  and "y,," is accepted too, as RFC 5802 allows a client that could but saw no offer);
  "p=" (channel binding asked for) and an authorization identity ("a=") are refused.
- SASLprep: printable ASCII (0x20-0x7E) maps to itself (RFC 4013 changes none of it);
  any other character in a user name or password is refused rather than guessed at.
- Mandatory extensions ("m=") are refused (RFC 5802 5.1).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Final

from mqttq.protocol.enhanced_auth import AUTHENTICATION_METHODS, AuthDataError

__all__ = [
    "DEFAULT_ITERATIONS",
    "MECHANISMS",
    "ClientFinal",
    "ClientFirst",
    "ScramError",
    "ScramMechanism",
    "ScramSecret",
    "ScramServer",
    "client_proof",
    "make_secret",
    "parse_client_final",
    "parse_client_first",
    "password_tag",
    "renewed_secrets",
    "salted_password",
    "saslprep",
    "scram_mechanisms",
    "scram_secrets",
    "secret_from_text",
    "secret_to_text",
    "secrets_for_write",
    "server_signature",
]

MECHANISMS: Final[dict[str, str]] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
"""SASL mechanism name (the MQTT Authentication Method) -> its hashlib hash name."""
assert frozenset(MECHANISMS) == AUTHENTICATION_METHODS

DEFAULT_ITERATIONS: Final = 4096
"""RFC 7677's minimum for SCRAM-SHA-256, and the default of `credentials add --scram`."""
MIN_ITERATIONS: Final = 4096
MAX_ITERATIONS: Final = 10_000_000
"""Bounds on a stored iteration count: a hand-edited row cannot make a CONNECT hang."""
SALT_BYTES: Final = 16
NONCE_BYTES: Final = 24
MAX_MESSAGE: Final = 4096
"""Bytes a SCRAM message may have: a client-first or -final is far below this."""

_GS2_HEADERS: Final = ("n,,", "y,,")


class ScramError(AuthDataError):
    """A SCRAM message that is malformed, unsupported or wrong; the message says which
    (it never says whether a user name exists)."""


@dataclass(frozen=True, slots=True)
class ScramSecret:
    """What the server stores for one user and mechanism (RFC 5802 section 3)."""

    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes
    password_tag: str = ""
    """`password_tag` of the credential's password hash when the secret was made: a
    secret whose tag no longer matches (the password was changed by something that did
    not renew the SCRAM secrets) is not used (`Credential.scram_secret`)."""


def password_tag(password_hash: str) -> str:
    """A short digest of a stored password hash, binding SCRAM secrets to it."""
    return hashlib.sha256(password_hash.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class ClientFirst:
    """A parsed client-first-message: `bare` is client-first-message-bare, verbatim."""

    gs2_header: str
    bare: str
    username: str
    nonce: str


@dataclass(frozen=True, slots=True)
class ClientFinal:
    """A parsed client-final-message; `without_proof` is its text up to ",p=", verbatim."""

    channel_binding: bytes
    nonce: str
    proof: bytes
    without_proof: str


# ---------------------------------------------------------------------- the math


def saslprep(text: str, what: str) -> str:
    """`text` prepared per RFC 4013 for the printable ASCII it supports; ScramError for
    anything else (`what` names the field in the message)."""
    if not text:
        raise ScramError(f"SCRAM {what} is empty")
    if not all(" " <= char <= "~" for char in text):
        raise ScramError(f"SCRAM {what} must be printable ASCII (no SASLprep beyond that)")
    return text


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    """SaltedPassword := Hi(Normalize(password), salt, i) (PBKDF2 with HMAC-H)."""
    prepared = saslprep(password, "password").encode("ascii")
    return hashlib.pbkdf2_hmac(hash_name, prepared, salt, iterations)


def make_secret(
    mechanism: str,
    password: str,
    *,
    salt: bytes | None = None,
    iterations: int = DEFAULT_ITERATIONS,
    password_hash: str = "",
) -> ScramSecret:
    """The stored secret of `password` for `mechanism` (a fresh random salt unless one is
    given), bound to the credential's `password_hash` when given. ScramError for an
    unknown mechanism or a password SASLprep refuses."""
    hash_name = _hash_name(mechanism)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramError(f"SCRAM iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}")
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    salted = salted_password(hash_name, password, salt, iterations)
    client_key = _hmac(hash_name, salted, b"Client Key")
    return ScramSecret(
        mechanism=mechanism,
        salt=salt,
        iterations=iterations,
        stored_key=hashlib.new(hash_name, client_key).digest(),
        server_key=_hmac(hash_name, salted, b"Server Key"),
        password_tag=password_tag(password_hash) if password_hash else "",
    )


def scram_secrets(
    password: str,
    password_hash: str,
    *,
    iterations: int = DEFAULT_ITERATIONS,
    mechanisms: tuple[str, ...] = tuple(MECHANISMS),
) -> tuple[ScramSecret, ...]:
    """What `mqttq credentials add --scram` stores: a secret per mechanism, bound to the
    credential's new `password_hash` (CPU-bound: a few milliseconds per mechanism at the
    default iterations; run it off the event loop)."""
    return tuple(
        make_secret(name, password, iterations=iterations, password_hash=password_hash)
        for name in mechanisms
    )


def secrets_for_write(
    requested: bool | None,
    password: str | None,
    password_hash: str,
    existing: tuple[ScramSecret, ...] = (),
) -> tuple[ScramSecret, ...] | None:
    """The SCRAM secrets a credential write stores, None to leave them as they are.
    `requested` is the API's `scram` field: True makes fresh ones from `password` (which
    must then be given), False removes them; None keeps them, renewed for a new
    `password` (`password_hash` is that password's new hash)."""
    if requested is False:
        return ()
    if password is None:
        if requested:
            raise ScramError("SCRAM secrets are made from the password: give it too")
        return None
    if requested:
        return scram_secrets(password, password_hash)
    return renewed_secrets(existing, password, password_hash) if existing else None


def renewed_secrets(
    existing: tuple[ScramSecret, ...], password: str, password_hash: str
) -> tuple[ScramSecret, ...]:
    """The secrets of a credential whose password changes: the same mechanisms and
    iteration counts, fresh salts, for the new password (none when it had none)."""
    return tuple(
        make_secret(old.mechanism, password, iterations=old.iterations, password_hash=password_hash)
        for old in existing
    )


def client_proof(hash_name: str, salted: bytes, auth_message: str) -> bytes:
    """ClientProof := ClientKey XOR HMAC(StoredKey, AuthMessage) (the client's side)."""
    client_key = _hmac(hash_name, salted, b"Client Key")
    stored = hashlib.new(hash_name, client_key).digest()
    signature = _hmac(hash_name, stored, auth_message.encode("utf-8"))
    return bytes(a ^ b for a, b in zip(client_key, signature, strict=True))


def server_signature(hash_name: str, server_key: bytes, auth_message: str) -> bytes:
    """ServerSignature := HMAC(ServerKey, AuthMessage)."""
    return _hmac(hash_name, server_key, auth_message.encode("utf-8"))


def _hash_name(mechanism: str) -> str:
    hash_name = MECHANISMS.get(mechanism)
    if hash_name is None:
        raise ScramError(f"unknown SCRAM mechanism {mechanism!r}")
    return hash_name


# ---------------------------------------------------------------------- stored form


def secret_to_text(secret: ScramSecret) -> str:
    """`<mechanism>$<iterations>$<salt>$<StoredKey>$<ServerKey>[$<password tag>]`, the
    bytes in base64."""
    parts = (secret.salt, secret.stored_key, secret.server_key)
    encoded = "$".join(base64.b64encode(part).decode("ascii") for part in parts)
    tag = f"${secret.password_tag}" if secret.password_tag else ""
    return f"{secret.mechanism}${secret.iterations}${encoded}{tag}"


def secret_from_text(text: str) -> ScramSecret:
    """The ScramSecret of `secret_to_text`'s form; ScramError naming what is wrong."""
    parts = text.split("$")
    tag = parts.pop() if len(parts) == 6 else ""
    if len(parts) != 5:
        raise ScramError("a stored SCRAM secret has five or six '$'-separated parts")
    mechanism, iterations_text = parts[0], parts[1]
    hash_name = _hash_name(mechanism)
    if not iterations_text.isdigit() or not (
        MIN_ITERATIONS <= int(iterations_text) <= MAX_ITERATIONS
    ):
        raise ScramError(f"stored SCRAM iterations {iterations_text!r} out of bounds")
    try:
        salt, stored_key, server_key = (base64.b64decode(p, validate=True) for p in parts[2:5])
    except (binascii.Error, ValueError):
        raise ScramError("a stored SCRAM secret is not base64") from None
    size = hashlib.new(hash_name).digest_size
    if not salt or len(stored_key) != size or len(server_key) != size:
        raise ScramError(f"a stored {mechanism} secret has keys of the wrong size")
    return ScramSecret(mechanism, salt, int(iterations_text), stored_key, server_key, tag)


# ---------------------------------------------------------------------- messages


def _text(data: bytes, what: str) -> str:
    if len(data) > MAX_MESSAGE:
        raise ScramError(f"SCRAM {what} longer than {MAX_MESSAGE} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(f"SCRAM {what} is not UTF-8") from None


def _attribute(part: str, name: str, what: str) -> str:
    if not part.startswith(name + "="):
        raise ScramError(f"SCRAM {what}: expected '{name}=' in {part[:20]!r}")
    return part[2:]


def _saslname(value: str) -> str:
    """A saslname with its '=2C' and '=3D' escapes undone (RFC 5802 5.1)."""
    out = []
    index = 0
    while index < len(value):
        char = value[index]
        if char == "=":
            escape = value[index : index + 3]
            if escape == "=2C":
                out.append(",")
            elif escape == "=3D":
                out.append("=")
            else:
                raise ScramError("SCRAM user name has a bad '=' escape")
            index += 3
            continue
        out.append(char)
        index += 1
    return saslprep("".join(out), "user name")


def _nonce(value: str, what: str) -> str:
    if not value or not all("!" <= char <= "~" and char != "," for char in value):
        raise ScramError(f"SCRAM {what} nonce must be printable ASCII without ','")
    return value


def parse_client_first(data: bytes) -> ClientFirst:
    """client-first-message = gs2-header client-first-message-bare; ScramError if it is
    malformed or asks for what is not supported (see the module docstring)."""
    text = _text(data, "client-first-message")
    if text.startswith("p="):
        raise ScramError("SCRAM channel binding is not supported (use 'n,,')")
    header = text[:3]
    if header not in _GS2_HEADERS:
        if text[:2] in ("n,", "y,"):
            raise ScramError("SCRAM authorization identities (a=) are not supported")
        raise ScramError("SCRAM client-first-message must start with the GS2 header 'n,,'")
    bare = text[3:]
    parts = bare.split(",")
    if parts[0].startswith("m="):
        raise ScramError("SCRAM mandatory extensions (m=) are not supported")
    if len(parts) < 2:
        raise ScramError("SCRAM client-first-message needs n= and r=")
    username = _saslname(_attribute(parts[0], "n", "client-first-message"))
    nonce = _nonce(_attribute(parts[1], "r", "client-first-message"), "client")
    return ClientFirst(header, bare, username, nonce)


def parse_client_final(data: bytes) -> ClientFinal:
    """client-final-message = c=<b64 GS2 header> ,r=<nonce> [,ext] ,p=<b64 proof>."""
    text = _text(data, "client-final-message")
    head, separator, proof_text = text.rpartition(",p=")
    if not separator:
        raise ScramError("SCRAM client-final-message has no proof (p=)")
    parts = head.split(",")
    if len(parts) < 2:
        raise ScramError("SCRAM client-final-message needs c= and r=")
    try:
        binding = base64.b64decode(_attribute(parts[0], "c", "client-final-message"), validate=True)
        proof = base64.b64decode(proof_text, validate=True)
    except (binascii.Error, ValueError):
        raise ScramError("SCRAM client-final-message: c= or p= is not base64") from None
    nonce = _nonce(_attribute(parts[1], "r", "client-final-message"), "final")
    return ClientFinal(binding, nonce, proof, head)


# ---------------------------------------------------------------------- the exchange


class ScramServer:
    """The server side of one SCRAM exchange, made from the parsed client-first-message
    and the user's stored secret (None when there is none: the exchange then goes on with
    a salt derived from `decoy_key` and the user name, so a stranger cannot tell unknown
    user names from known ones, and fails at the proof)."""

    __slots__ = ("_first", "_hash_name", "_nonce", "_secret", "mechanism")

    def __init__(
        self,
        mechanism: str,
        first: ClientFirst,
        secret: ScramSecret | None,
        *,
        decoy_key: bytes,
        server_nonce: str | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._hash_name = _hash_name(mechanism)
        if secret is not None and secret.mechanism != mechanism:
            secret = None
        if secret is None:
            salt = _hmac("sha256", decoy_key, first.username.encode("utf-8"))[:SALT_BYTES]
            secret = ScramSecret(mechanism, salt, DEFAULT_ITERATIONS, b"", b"")
        self._secret = secret
        self._first = first
        suffix = server_nonce or base64.b64encode(secrets.token_bytes(NONCE_BYTES)).decode()
        self._nonce = first.nonce + suffix

    def server_first(self) -> bytes:
        """server-first-message: r=<client+server nonce>,s=<salt>,i=<iterations>."""
        salt = base64.b64encode(self._secret.salt).decode("ascii")
        return f"r={self._nonce},s={salt},i={self._secret.iterations}".encode("ascii")

    def server_final(self, data: bytes) -> bytes:
        """Check the client-final-message; server-final-message (v=<signature>) when its
        proof is right, else ScramError."""
        final = parse_client_final(data)
        if final.channel_binding != self._first.gs2_header.encode("ascii"):
            raise ScramError("SCRAM channel binding data does not match the GS2 header")
        if final.nonce != self._nonce:
            raise ScramError("SCRAM nonce does not match this exchange")
        secret = self._secret
        auth_message = (
            f"{self._first.bare},{self.server_first().decode('ascii')},{final.without_proof}"
        )
        hash_name = self._hash_name
        signature = _hmac(hash_name, secret.stored_key, auth_message.encode("utf-8"))
        if len(final.proof) != len(signature) or not secret.stored_key:
            raise ScramError("SCRAM proof is wrong")
        client_key = bytes(a ^ b for a, b in zip(final.proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(hash_name, client_key).digest(), secret.stored_key):
            raise ScramError("SCRAM proof is wrong")
        verifier = server_signature(hash_name, secret.server_key, auth_message)
        return b"v=" + base64.b64encode(verifier)


class ScramMechanism:
    """One SCRAM exchange as protocol/enhanced_auth.py's `Mechanism` of ScramSecret."""

    __slots__ = ("_decoy_key", "_first", "_server", "_server_nonce", "mechanism")

    def __init__(self, mechanism: str, decoy_key: bytes, server_nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._decoy_key = decoy_key
        self._server_nonce = server_nonce
        self._first: ClientFirst | None = None
        self._server: ScramServer | None = None

    def client_first(self, data: bytes) -> str:
        self._first = parse_client_first(data)
        return self._first.username

    def server_first(self, secret: ScramSecret | None) -> bytes:
        if self._first is None:
            raise ScramError("SCRAM server-first-message before a client-first-message")
        self._server = ScramServer(
            self.mechanism,
            self._first,
            secret,
            decoy_key=self._decoy_key,
            server_nonce=self._server_nonce,
        )
        return self._server.server_first()

    def server_final(self, data: bytes) -> bytes:
        if self._server is None:
            raise ScramError("SCRAM client-final-message before a server-first-message")
        return self._server.server_final(data)


def scram_mechanisms(
    decoy_key: bytes, server_nonce: str | None = None
) -> dict[str, Callable[[], ScramMechanism]]:
    """A factory of one exchange per SCRAM method, for `EnhancedAuth`; `decoy_key` is the
    broker's secret for unknown users' salts (see `ScramServer`)."""
    return {name: partial(ScramMechanism, name, decoy_key, server_nonce) for name in MECHANISMS}
