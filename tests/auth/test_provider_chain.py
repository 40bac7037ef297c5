"""ProviderChain without I/O: the order it asks in, the blocked provider first, SKIP, the
bounded TTL cache (keyed by a password digest), an identity's expiry, the counts."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from mqttq.auth.authenticator import AuthRefusal, Identity
from mqttq.auth.model import ClientType
from mqttq.auth.providers.base import (
    SKIP,
    AuthRequest,
    Decision,
    bad_credentials,
    banned,
    unavailable,
)
from mqttq.auth.providers.chain import ProviderChain
from mqttq.reasons import ReasonCode

ALICE = Identity("alice", "acme", ClientType.DEVICE, None, None)


@dataclass
class Scripted:
    """A provider answering from a script and recording what it was asked."""

    name: str
    answer: Decision
    cacheable: bool = True
    asked: list[AuthRequest] = field(default_factory=list)

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def authenticate(self, request: AuthRequest) -> Decision:
        self.asked.append(request)
        return self.answer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def request(password: bytes | None = b"pw", client_id: str = "c") -> AuthRequest:
    return AuthRequest(client_id, "alice", password, "127.0.0.1", "tcp")


def decide(chain: ProviderChain, req: AuthRequest) -> Identity | AuthRefusal:
    return asyncio.run(chain.decide(req))


def test_the_first_answer_that_is_not_skip_decides_in_order() -> None:
    first = Scripted("jwt", SKIP)
    second = Scripted("http", ALICE)
    third = Scripted("credentials", bad_credentials("no"), cacheable=False)
    chain = ProviderChain([first, second, third])
    assert decide(chain, request()) is ALICE
    assert (len(first.asked), len(second.asked), len(third.asked)) == (1, 1, 0)
    assert chain.statistics() == {("jwt", "skip"): 1, ("http", "allow"): 1}


def test_blocked_is_asked_first_and_its_refusal_wins() -> None:
    allow = Scripted("credentials", ALICE, cacheable=False)
    chain = ProviderChain([allow])
    chain.set_blocked(Scripted("blocked", banned("blocked by the operator"), cacheable=False))
    refusal = decide(chain, request())
    assert isinstance(refusal, AuthRefusal)
    assert refusal.reason_code == ReasonCode.BANNED
    assert allow.asked == []
    assert chain.names == ("blocked", "credentials")


def test_when_every_provider_skips_the_refusal_depends_on_credentials() -> None:
    chain = ProviderChain([Scripted("jwt", SKIP)])
    with_password = decide(chain, request())
    anonymous = decide(chain, AuthRequest("c", None, None, "", "tcp"))
    assert isinstance(with_password, AuthRefusal)
    assert isinstance(anonymous, AuthRefusal)
    assert with_password.reason_code == ReasonCode.BAD_USER_NAME_OR_PASSWORD
    assert anonymous.reason_code == ReasonCode.NOT_AUTHORIZED


def test_cached_answers_last_the_ttl_and_a_new_password_is_a_new_key() -> None:
    clock = Clock()
    http = Scripted("http", ALICE)
    chain = ProviderChain([http], cache_ttl=60, clock=clock)
    for _ in range(3):
        assert decide(chain, request()) is ALICE
    assert len(http.asked) == 1
    assert chain.cache_hits == 2
    decide(chain, request(b"other"))
    assert len(http.asked) == 2
    clock.now += 61
    decide(chain, request())
    assert len(http.asked) == 3
    assert chain.statistics() == {("http", "allow"): 5}


def test_the_cache_holds_no_password_and_is_bounded() -> None:
    http = Scripted("http", ALICE)
    chain = ProviderChain([http], cache_ttl=60, cache_size=2)
    for client_id in ("a", "b", "c"):
        decide(chain, request(b"hunter2", client_id))
    cache = chain._cache
    assert len(cache) == 2
    assert b"hunter2" not in repr(list(cache)).encode()
    decide(chain, request(b"hunter2", "a"))  # the oldest was forgotten
    assert len(http.asked) == 4


def test_an_identity_is_never_cached_past_its_expiry_nor_an_outage() -> None:
    clock = Clock()
    expiring = Identity("t", "default", ClientType.DEVICE, None, None, expires_at=clock.now + 5)
    jwt = Scripted("jwt", expiring)
    chain = ProviderChain([jwt], cache_ttl=60, clock=clock)
    decide(chain, request())
    clock.now += 6
    decide(chain, request())
    assert len(jwt.asked) == 2
    down = Scripted("http", unavailable("the service is down"))
    chain = ProviderChain([down], cache_ttl=60, clock=clock)
    decide(chain, request())
    decide(chain, request())
    assert len(down.asked) == 2


def test_a_ttl_of_zero_caches_nothing_and_uncacheable_providers_are_always_asked() -> None:
    http = Scripted("http", ALICE)
    assert len({id(decide(ProviderChain([http]), request())) for _ in range(2)}) == 1
    assert len(http.asked) == 2
    credentials = Scripted("credentials", ALICE, cacheable=False)
    chain = ProviderChain([credentials], cache_ttl=60)
    decide(chain, request())
    decide(chain, request())
    assert len(credentials.asked) == 2
