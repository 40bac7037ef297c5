"""EnhancedAuth (protocol/enhanced_auth.py) follows its table for every input in every phase,
and never raises anything but ProtocolError with a reason code its answering packet may
carry; the SCRAM parsers raise nothing but ScramError on any bytes."""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from mqttq.auth.scram import (
    ScramError,
    ScramSecret,
    make_secret,
    parse_client_final,
    parse_client_first,
    scram_mechanisms,
)
from mqttq.codec.packets import AuthPacket
from mqttq.codec.properties import Properties
from mqttq.errors import ProtocolError
from mqttq.protocol.enhanced_auth import (
    TRANSITIONS,
    Authenticated,
    AuthInput,
    AuthPhase,
    EnhancedAuth,
    LookUp,
    SendAuth,
)
from mqttq.reasons import ReasonCode
from tests.scram.scram_client import ScramClient

METHOD = "SCRAM-SHA-256"
SECRET = make_secret(METHOD, "pencil")
CONNACK_CODES = {
    ReasonCode.BAD_AUTHENTICATION_METHOD,
    ReasonCode.BAD_USER_NAME_OR_PASSWORD,
    ReasonCode.PROTOCOL_ERROR,
    ReasonCode.NOT_AUTHORIZED,
}
DISCONNECT_CODES = {
    ReasonCode.BAD_AUTHENTICATION_METHOD,
    ReasonCode.PROTOCOL_ERROR,
    ReasonCode.NOT_AUTHORIZED,
}


def exchange() -> EnhancedAuth[ScramSecret]:
    return EnhancedAuth(scram_mechanisms(b"decoy"))


def auth(reason: ReasonCode, data: bytes | None, method: str | None = METHOD) -> AuthPacket:
    props = Properties(authentication_method=method, authentication_data=data)
    return AuthPacket(reason, props)


def drive_to(phase: AuthPhase) -> tuple[EnhancedAuth[ScramSecret], ScramClient]:
    """A machine in `phase`, reached by a well-behaved client "user"/"pencil"."""
    machine = exchange()
    client = ScramClient(METHOD, "user", "pencil")
    if phase is AuthPhase.START:
        return machine, client
    if phase is AuthPhase.FAILED:
        try:
            machine.receive_auth(auth(ReasonCode.SUCCESS, None))
        except ProtocolError:
            return machine, client
        raise AssertionError("AUTH 0x00 accepted at the start")
    assert machine.connect(METHOD, client.first()) == LookUp("user")
    if phase is AuthPhase.LOOKUP:
        return machine, client
    sent = machine.credential(SECRET)
    if phase is AuthPhase.AWAIT_FINAL:
        return machine, client
    done = machine.receive_auth(auth(ReasonCode.CONTINUE_AUTHENTICATION, client.final(sent.data)))
    assert isinstance(done, Authenticated) and client.verify(done.data)
    if phase is AuthPhase.AUTHENTICATED:
        return machine, client
    client = ScramClient(METHOD, "user", "pencil")
    assert machine.receive_auth(auth(ReasonCode.RE_AUTHENTICATE, client.first())) == LookUp("user")
    if phase is AuthPhase.REAUTH_LOOKUP:
        return machine, client
    machine.credential(SECRET)
    assert phase is AuthPhase.REAUTH_AWAIT_FINAL
    return machine, client


def apply(machine: EnhancedAuth[ScramSecret], auth_input: AuthInput, data: bytes) -> object:
    if auth_input is AuthInput.CONNECT:
        return machine.connect(METHOD, data)
    if auth_input is AuthInput.CREDENTIAL:
        return machine.credential(SECRET)
    reason = {
        AuthInput.AUTH_CONTINUE: ReasonCode.CONTINUE_AUTHENTICATION,
        AuthInput.AUTH_REAUTHENTICATE: ReasonCode.RE_AUTHENTICATE,
        AuthInput.AUTH_SUCCESS: ReasonCode.SUCCESS,
    }[auth_input]
    return machine.receive_auth(auth(reason, data))


def test_a_well_behaved_client_reaches_every_phase() -> None:
    for phase in AuthPhase:
        machine, _ = drive_to(phase)
        assert machine.phase is phase


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(list(AuthPhase)), st.sampled_from(list(AuthInput)), st.binary(max_size=80))
def test_every_pair_follows_the_table(phase: AuthPhase, auth_input: AuthInput, data: bytes) -> None:
    """A pair missing from TRANSITIONS is 0x82 and FAILED; a pair in it either moves to the
    table's phase or is refused for its content with a code its answer may carry."""
    machine, _ = drive_to(phase)
    expected = TRANSITIONS.get((phase, auth_input))
    try:
        apply(machine, auth_input, data)
    except ProtocolError as error:
        assert machine.phase is AuthPhase.FAILED
        if expected is None:
            assert error.reason_code == ReasonCode.PROTOCOL_ERROR
        else:
            live = phase in (AuthPhase.REAUTH_LOOKUP, AuthPhase.REAUTH_AWAIT_FINAL)
            assert error.reason_code in (DISCONNECT_CODES if live else CONNACK_CODES)
        return
    assert expected is not None, f"{auth_input} accepted in {phase}"
    assert machine.phase is expected


PACKETS = st.builds(
    auth,
    st.sampled_from(
        [ReasonCode.SUCCESS, ReasonCode.CONTINUE_AUTHENTICATION, ReasonCode.RE_AUTHENTICATE]
    ),
    st.one_of(st.none(), st.binary(max_size=60)),
    st.sampled_from([METHOD, "SCRAM-SHA-512", "PLAIN", None]),
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(
            PACKETS,
            st.just("credential"),
            st.just("connect"),
            st.just("client-final"),
            st.just("client-first"),
        ),
        max_size=8,
    )
)
def test_any_order_of_inputs_has_a_defined_outcome(steps: list[object]) -> None:
    """Whatever comes in whatever order: a LookUp, SendAuth or Authenticated, or a
    ProtocolError after which every input is 0x82. Never another exception."""
    machine = exchange()
    client = ScramClient(METHOD, "user", "pencil")
    server_first = b""
    failed = False
    for step in steps:
        try:
            if step == "credential":
                out: object = machine.credential(SECRET)
            elif step == "connect":
                out = machine.connect(METHOD, client.first())
            elif step == "client-first":
                client = ScramClient(METHOD, "user", "pencil")
                out = machine.receive_auth(auth(ReasonCode.RE_AUTHENTICATE, client.first()))
            elif step == "client-final":
                data = (
                    client.final(server_first, check_nonce=False)
                    if server_first
                    else b"c=biws,r=x,p=AAAA"
                )
                out = machine.receive_auth(auth(ReasonCode.CONTINUE_AUTHENTICATION, data))
            else:
                assert isinstance(step, AuthPacket)
                out = machine.receive_auth(step)
        except ProtocolError as error:
            if failed:
                assert error.reason_code == ReasonCode.PROTOCOL_ERROR
            assert error.reason_code in CONNACK_CODES | DISCONNECT_CODES
            assert machine.phase is AuthPhase.FAILED
            failed = True
            continue
        assert not failed, "an input was accepted after a failure"
        assert isinstance(out, LookUp | SendAuth | Authenticated)
        if isinstance(out, SendAuth):
            server_first = out.data
        if isinstance(out, Authenticated):
            assert out.username == "user" and client.verify(out.data)
            assert machine.live


def test_wrong_proof_during_connect_is_0x86_and_during_reauth_0x87() -> None:
    for phase, code in (
        (AuthPhase.LOOKUP, ReasonCode.BAD_USER_NAME_OR_PASSWORD),
        (AuthPhase.REAUTH_LOOKUP, ReasonCode.NOT_AUTHORIZED),
    ):
        machine, client = drive_to(phase)
        server_first = machine.credential(SECRET).data
        final = client.final(server_first, wrong_password="not pencil")
        try:
            machine.receive_auth(auth(ReasonCode.CONTINUE_AUTHENTICATION, final))
        except ProtocolError as error:
            assert error.reason_code == code
            assert error.message == "SCRAM proof is wrong"
        else:
            raise AssertionError(f"a wrong proof was accepted after {phase}")


def test_reauth_as_another_user_is_0x87() -> None:
    machine, _ = drive_to(AuthPhase.AUTHENTICATED)
    other = ScramClient(METHOD, "mallory", "pencil")
    try:
        machine.receive_auth(auth(ReasonCode.RE_AUTHENTICATE, other.first()))
    except ProtocolError as error:
        assert error.reason_code == ReasonCode.NOT_AUTHORIZED
    else:
        raise AssertionError("re-authentication as another user was accepted")


def test_unsupported_method_and_changed_method_are_0x8c() -> None:
    machine = exchange()
    try:
        machine.connect("SCRAM-SHA-1", b"n,,n=user,r=abc")
    except ProtocolError as error:
        assert error.reason_code == ReasonCode.BAD_AUTHENTICATION_METHOD
    else:
        raise AssertionError("SCRAM-SHA-1 accepted")
    machine, client = drive_to(AuthPhase.AUTHENTICATED)
    again = auth(ReasonCode.RE_AUTHENTICATE, client.first(), method="SCRAM-SHA-512")
    try:
        machine.receive_auth(again)
    except ProtocolError as error:
        assert error.reason_code == ReasonCode.BAD_AUTHENTICATION_METHOD
    else:
        raise AssertionError("a changed method was accepted")


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_client_first_parser_raises_only_scram_error(data: bytes) -> None:
    try:
        first = parse_client_first(data)
    except ScramError:
        return
    assert data.startswith((b"n,,", b"y,,")) and first.username and first.nonce


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=200),
        st.builds(
            lambda user, nonce: f"n,,n={user},r={nonce}".encode(),
            st.text(max_size=20),
            st.text(max_size=20),
        ),
    )
)
def test_client_first_of_any_text_raises_only_scram_error(data: bytes) -> None:
    with contextlib.suppress(ScramError):
        parse_client_first(data)


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=200),
        st.builds(
            lambda c, r, p: f"c={c},r={r},p={p}".encode(),
            st.text(max_size=12),
            st.text(max_size=12),
            st.text(max_size=40),
        ),
    )
)
def test_client_final_parser_raises_only_scram_error(data: bytes) -> None:
    with contextlib.suppress(ScramError):
        parse_client_final(data)
