"""EnhancedAuth: the broker side of MQTT 5 enhanced authentication, no I/O.

The method's own messages are a `Mechanism`'s (SCRAM: mqttq.auth.scram, a floor above;
it is handed in, one factory per Authentication Method); this module owns the MQTT side:
which packet may come when, and which reason code answers what.

The flows [MQTT-4.12]; what goes in, what comes out:

    CONNECT (method, client-first)   -> LookUp(user name)       the caller finds the secret
    credential(secret)               -> SendAuth(server-first)  AUTH 0x18
    AUTH 0x18 (client-final)         -> Authenticated(server-final)   CONNACK 0x00 with it
    -- on the live connection [MQTT-4.12.1] --
    AUTH 0x19 (client-first)         -> LookUp(user name)
    credential(secret)               -> SendAuth(server-first)  AUTH 0x18
    AUTH 0x18 (client-final)         -> Authenticated(server-final)   AUTH 0x00 with it

Every (phase, input) pair missing from `TRANSITIONS` raises ProtocolError 0x82 (an AUTH
out of order, an AUTH 0x00 from the client, a second re-authentication at once). Other
failures carry the reason code the packet that answers them may carry: while CONNECT is
unanswered, CONNACK 0x8C for a method the broker does not support and 0x86 for a method
message that is malformed or has a wrong proof (`AuthDataError` from the mechanism); on a
live connection DISCONNECT 0x8C for a changed method and 0x87 for a failed
re-authentication (DISCONNECT cannot carry 0x86), including one as another user. After a
failure the exchange is FAILED: every input raises. Nothing here raises anything but ProtocolError.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final, Generic, NoReturn, Protocol, TypeVar

from mqttq.codec.packets import AuthPacket
from mqttq.errors import MqttqError, ProtocolError
from mqttq.reasons import ReasonCode

__all__ = [
    "AUTHENTICATION_METHODS",
    "TRANSITIONS",
    "AuthDataError",
    "AuthInput",
    "AuthPhase",
    "Authenticated",
    "EnhancedAuth",
    "LookUp",
    "Mechanism",
    "SendAuth",
]

AUTHENTICATION_METHODS: Final = frozenset(("SCRAM-SHA-256", "SCRAM-SHA-512"))
"""The Authentication Methods the broker supports in CONNECT (mqttq.auth.scram's
MECHANISMS; a test keeps the two equal)."""

S_contra = TypeVar("S_contra", contravariant=True)
S = TypeVar("S")


class AuthDataError(MqttqError):
    """Authentication Data a mechanism refuses: malformed, unsupported or a wrong proof.
    The message says which (never whether a user name exists)."""


class Mechanism(Protocol[S_contra]):
    """One exchange of a challenge/response method; S_contra is what it stores per user."""

    def client_first(self, data: bytes) -> str:
        """Read the client's first message; the user name it claims (AuthDataError)."""
        ...

    def server_first(self, secret: S_contra | None) -> bytes:
        """The server's challenge, from the user's secret (None: unknown user; the
        exchange must go on and fail at `server_final`)."""
        ...

    def server_final(self, data: bytes) -> bytes:
        """Check the client's answer: the server's final message, or AuthDataError."""
        ...


class AuthPhase(Enum):
    """Where an exchange is."""

    START = "start"
    LOOKUP = "lookup"
    """client-first read during CONNECT; the user's secret is being looked up."""
    AWAIT_FINAL = "await_final"
    """server-first sent (AUTH 0x18); the client-final AUTH 0x18 is due."""
    AUTHENTICATED = "authenticated"
    REAUTH_LOOKUP = "reauth_lookup"
    REAUTH_AWAIT_FINAL = "reauth_await_final"
    FAILED = "failed"


class AuthInput(Enum):
    """What can happen to an exchange."""

    CONNECT = "connect"
    CREDENTIAL = "credential"
    AUTH_CONTINUE = "auth_0x18"
    AUTH_REAUTHENTICATE = "auth_0x19"
    AUTH_SUCCESS = "auth_0x00"


_P = AuthPhase
_I = AuthInput

TRANSITIONS: Final[dict[tuple[AuthPhase, AuthInput], AuthPhase]] = {
    (_P.START, _I.CONNECT): _P.LOOKUP,
    (_P.LOOKUP, _I.CREDENTIAL): _P.AWAIT_FINAL,
    (_P.AWAIT_FINAL, _I.AUTH_CONTINUE): _P.AUTHENTICATED,
    (_P.AUTHENTICATED, _I.AUTH_REAUTHENTICATE): _P.REAUTH_LOOKUP,
    (_P.REAUTH_LOOKUP, _I.CREDENTIAL): _P.REAUTH_AWAIT_FINAL,
    (_P.REAUTH_AWAIT_FINAL, _I.AUTH_CONTINUE): _P.AUTHENTICATED,
}
"""(phase, input) -> the phase after it; a missing pair is a Protocol Error."""

_AUTH_INPUTS: Final = {
    ReasonCode.CONTINUE_AUTHENTICATION: _I.AUTH_CONTINUE,
    ReasonCode.RE_AUTHENTICATE: _I.AUTH_REAUTHENTICATE,
    ReasonCode.SUCCESS: _I.AUTH_SUCCESS,
}
_LIVE: Final = frozenset((_P.AUTHENTICATED, _P.REAUTH_LOOKUP, _P.REAUTH_AWAIT_FINAL))


@dataclass(frozen=True, slots=True)
class LookUp:
    """Find `username`'s stored secret for the method, then call `credential`."""

    username: str


@dataclass(frozen=True, slots=True)
class SendAuth:
    """Send AUTH 0x18 with the method and `data` (server-first-message)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Authenticated:
    """The client proved it is `username`: send `data` (server-final-message) as the
    Authentication Data of CONNACK 0x00, or of AUTH 0x00 after a re-authentication."""

    username: str
    data: bytes


class EnhancedAuth(Generic[S]):
    """One connection's enhanced authentication (see the module docstring).
    `mechanisms` maps each supported Authentication Method to a factory of one exchange
    (a fresh one for the CONNECT and for each re-authentication)."""

    __slots__ = ("_mechanism", "_mechanisms", "_username_claimed", "method", "phase", "username")

    def __init__(self, mechanisms: Mapping[str, Callable[[], Mechanism[S]]]) -> None:
        self.phase = AuthPhase.START
        self.method = ""
        self.username: str | None = None
        """The authenticated user (None until the CONNECT's exchange succeeds)."""
        self._mechanisms = mechanisms
        self._mechanism: Mechanism[S] | None = None
        self._username_claimed = ""

    @property
    def live(self) -> bool:
        """True once CONNECT was authenticated (re-authentications may follow)."""
        return self.phase in _LIVE

    def connect(self, method: str, data: bytes | None) -> LookUp:
        """The CONNECT's Authentication Method and Data (the client's first message)."""
        self._step(_I.CONNECT)
        if method not in self._mechanisms:
            self._fail(
                ReasonCode.BAD_AUTHENTICATION_METHOD,
                f"authentication method {method!r} not supported",
            )
        self.method = method
        return self._client_first(data)

    def credential(self, secret: S | None) -> SendAuth:
        """The user's stored secret for the method (None: no such user, or none for this
        method; the exchange goes on and fails at the proof)."""
        self._step(_I.CREDENTIAL)
        mechanism = self._mechanism
        assert mechanism is not None  # made in the LOOKUP phases that allow this input
        try:
            return SendAuth(mechanism.server_first(secret))
        except AuthDataError as error:
            self._refused(str(error))

    def receive_auth(self, packet: AuthPacket) -> LookUp | Authenticated:
        """An AUTH from the client: 0x18 with its answer, or 0x19 with a first message to
        re-authenticate."""
        auth_input = _AUTH_INPUTS.get(packet.reason_code)
        if auth_input is None:  # the codec allows no other code; kept total all the same
            self._fail(ReasonCode.PROTOCOL_ERROR, f"AUTH reason code {packet.reason_code:#x}")
        self._step(auth_input)
        method = packet.properties.authentication_method
        if method is None:  # [MQTT-3.15.2.2.2]
            self._fail(ReasonCode.PROTOCOL_ERROR, "AUTH without an Authentication Method")
        if method != self.method:  # [MQTT-4.12.1-1]
            self._fail(
                ReasonCode.BAD_AUTHENTICATION_METHOD,
                f"AUTH method {method!r} is not the connection's {self.method!r}",
            )
        data = packet.properties.authentication_data
        if auth_input is _I.AUTH_REAUTHENTICATE:
            return self._client_first(data)
        return self._client_final(data)

    # ------------------------------------------------------------------ steps

    def _step(self, auth_input: AuthInput) -> None:
        phase = self.phase
        after = TRANSITIONS.get((phase, auth_input))
        if after is None:
            self._fail(
                ReasonCode.PROTOCOL_ERROR,
                f"{auth_input.value} not allowed in authentication phase {phase.value}",
            )
        self.phase = after

    def _fail(self, reason_code: ReasonCode, message: str) -> NoReturn:
        """Raise ProtocolError(reason_code); FAILED from now on."""
        self.phase = AuthPhase.FAILED
        self._mechanism = None
        raise ProtocolError(reason_code, message)

    def _refused(self, message: str) -> NoReturn:
        """The method's refusal: 0x86 while CONNECT is unanswered, 0x87 on a live
        connection (DISCONNECT cannot carry 0x86)."""
        live = self.username is not None
        code = ReasonCode.NOT_AUTHORIZED if live else ReasonCode.BAD_USER_NAME_OR_PASSWORD
        self._fail(code, message)

    def _client_first(self, data: bytes | None) -> LookUp:
        mechanism = self._mechanisms[self.method]()
        try:
            username = mechanism.client_first(data or b"")
        except AuthDataError as error:
            self._refused(str(error))
        if self.username is not None and username != self.username:
            self._fail(ReasonCode.NOT_AUTHORIZED, "re-authentication as another user")
        self._mechanism = mechanism
        self._username_claimed = username
        return LookUp(username)

    def _client_final(self, data: bytes | None) -> Authenticated:
        mechanism = self._mechanism
        assert mechanism is not None  # the AWAIT_FINAL phases follow a first message
        try:
            final = mechanism.server_final(data or b"")
        except AuthDataError as error:
            self._refused(str(error))
        self._mechanism = None
        self.username = self._username_claimed
        return Authenticated(self.username, final)
