"""Password hashing for client credentials: scrypt from the standard library.

An encoded hash describes itself: `scrypt$<n>$<r>$<p>$<salt>$<key>` (salt and key in
standard base64), so verification reads the cost parameters from the encoding and the
defaults can be raised later without invalidating stored hashes.

Both functions are CPU-bound on purpose (tens of milliseconds, about 16 MiB of memory):
callers on the event loop run them in a thread, `await asyncio.to_thread(verify_password,
...)`, never on the loop itself.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from typing import Final

__all__ = ["SCHEME", "hash_password", "verify_password"]

SCHEME: Final = "scrypt"
N: Final = 2**14
R: Final = 8
P: Final = 1
SALT_BYTES: Final = 16
KEY_BYTES: Final = 32

# Bounds on what an encoding may ask for, so a corrupted or hostile row cannot make one
# verification take gigabytes of memory or minutes of CPU.
_MAX_MEMORY: Final = 2**30
_MAX_P: Final = 16
_MIN_SALT: Final = 8
_MIN_KEY: Final = 16
_MAX_KEY: Final = 64
_NUMBER = re.compile(r"[1-9][0-9]{0,9}")


def _scrypt(password: bytes, salt: bytes, *, n: int, r: int, p: int, size: int) -> bytes:
    # OpenSSL needs 128 * r * (n + p + 2) bytes; the margin covers its bookkeeping.
    maxmem = 128 * r * (n + p + 2) + 2**20
    return hashlib.scrypt(password, salt=salt, n=n, r=r, p=p, maxmem=maxmem, dklen=size)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def hash_password(password: str) -> str:
    """A new salted scrypt hash of `password` (a fresh 16-byte random salt each call, so
    two hashes of one password differ). Raises UnicodeEncodeError (a ValueError) for a
    string that is not valid UTF-8 (lone surrogates)."""
    salt = secrets.token_bytes(SALT_BYTES)
    key = _scrypt(password.encode("utf-8"), salt, n=N, r=R, p=P, size=KEY_BYTES)
    return f"{SCHEME}${N}${R}${P}${_b64(salt)}${_b64(key)}"


def _parse(encoded: str) -> tuple[int, int, int, bytes, bytes] | None:
    """(n, r, p, salt, key) of a well-formed encoding within the bounds, else None."""
    parts = encoded.split("$")
    if len(parts) != 6 or parts[0] != SCHEME:
        return None
    if not all(_NUMBER.fullmatch(part) for part in parts[1:4]):
        return None
    n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
    if n < 2 or n & (n - 1) or p > _MAX_P or 128 * r * (n + p + 2) > _MAX_MEMORY:
        return None
    try:
        salt = base64.b64decode(parts[4], validate=True)
        key = base64.b64decode(parts[5], validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(salt) < _MIN_SALT or not _MIN_KEY <= len(key) <= _MAX_KEY:
        return None
    return n, r, p, salt, key


def verify_password(password: str, encoded: str) -> bool:
    """True iff `password` hashes to `encoded` (compared in constant time). A malformed
    encoding, an unknown scheme, parameters out of bounds or a password that is not valid
    UTF-8 give False; this function never raises."""
    parsed = _parse(encoded)
    if parsed is None:
        return False
    n, r, p, salt, key = parsed
    try:
        candidate = _scrypt(password.encode("utf-8"), salt, n=n, r=r, p=p, size=len(key))
    except (UnicodeEncodeError, ValueError, MemoryError):
        return False
    return hmac.compare_digest(candidate, key)
