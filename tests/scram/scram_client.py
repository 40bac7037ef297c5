"""The client side of SCRAM (RFC 5802) for the tests: what a client sends, and the check of
the server's signature. mqttq itself only ever plays the server; this is written from the
RFC, apart from mqttq.auth.scram, so the two meet only on the wire."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512", "SCRAM-SHA-1": "sha1"}


@dataclass
class ScramClient:
    """One exchange as the client: `first()`, then `final(server_first)`, then
    `verify(server_final)`."""

    mechanism: str
    username: str
    password: str
    nonce: str = field(default_factory=lambda: secrets.token_urlsafe(18))
    _bare: str = ""
    _auth_message: str = ""
    _salted: bytes = b""

    @property
    def hash_name(self) -> str:
        return HASHES[self.mechanism]

    def first(self) -> bytes:
        name = self.username.replace("=", "=3D").replace(",", "=2C")
        self._bare = f"n={name},r={self.nonce}"
        return f"n,,{self._bare}".encode()

    def final(
        self, server_first: bytes, *, wrong_password: str | None = None, check_nonce: bool = True
    ) -> bytes:
        """The client-final-message (a real client stops when the server's nonce does not
        extend its own; `check_nonce=False` goes on, to see the server refuse it)."""
        text = server_first.decode()
        fields = dict(part.split("=", 1) for part in text.split(","))
        assert fields["r"].startswith(self.nonce) or not check_nonce
        salt = base64.b64decode(fields["s"])
        password = self.password if wrong_password is None else wrong_password
        self._salted = hashlib.pbkdf2_hmac(
            self.hash_name, password.encode(), salt, int(fields["i"])
        )
        without_proof = f"c=biws,r={fields['r']}"
        self._auth_message = f"{self._bare},{text},{without_proof}"
        client_key = hmac.new(self._salted, b"Client Key", self.hash_name).digest()
        stored_key = hashlib.new(self.hash_name, client_key).digest()
        signature = hmac.new(stored_key, self._auth_message.encode(), self.hash_name).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        server_key = hmac.new(self._salted, b"Server Key", self.hash_name).digest()
        expected = hmac.new(server_key, self._auth_message.encode(), self.hash_name).digest()
        return server_final == b"v=" + base64.b64encode(expected)
