"""The admin API's answers to what no route handles over real HTTP: unknown routes and
methods, a body over the size limit, an unexpected failure (a plain 500), and the per-URI
rate limit, which comes before the token and reaches /metrics."""

from __future__ import annotations

import asyncio
import io
import json

import aiohttp
import pytest

from mqttq.limits.quota import Quota
from tests.admin.conftest import Api, DoubleApi, RunAdmin, RunDouble
from tests.admin.real_broker import TOKEN, populated
from tests.admin.test_admin_http import API, JSON_TYPE, assert_error

# --- errors -------------------------------------------------------------------------------


def test_unknown_route_and_method(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        assert_error(await api.get(f"{API}/nothing"), 404, "path")
        wrong = await api.call("PATCH", f"{API}/limits")
        assert_error(wrong, 405, "method")
        assert set(wrong.headers["Allow"].split(",")) == {"GET", "PUT"}

    admin(scenario)


def test_a_body_over_the_size_limit_is_413_naming_the_body(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        huge = json.dumps({"max_topics": 1, "pad": "x" * 2 * 1024 * 1024}).encode()
        answer = await api.call("PUT", f"{API}/limits", data=io.BytesIO(huge), headers=JSON_TYPE)
        assert_error(answer, 413, "body")
        assert api.real.broker.limits.node_quota == Quota()

    admin(scenario)


def test_unexpected_failure_is_a_plain_500(
    admin_double: RunDouble, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(api: DoubleApi) -> None:
        api.backend.broken = True
        answer = await api.get(f"{API}/sessions")
        assert answer.status == 500
        assert answer.body == {"error": "internal error", "field": None}
        assert "Traceback" not in str(answer.body)
        # The API keeps serving.
        assert (await api.get(f"{API}/limits")).status == 200

    with caplog.at_level("ERROR", logger="mqttq.admin"):
        admin_double(scenario)
    failures = [r for r in caplog.records if r.name == "mqttq.admin" and r.exc_info]
    assert [r.exc_info[1].__class__ for r in failures if r.exc_info] == [RuntimeError]


# --- per-URI rate limit -------------------------------------------------------------------


def test_rate_limit_refuses_after_the_budget_per_route(admin: RunAdmin) -> None:
    # 0.01 requests/s: a burst of one, and the next token is 100 s away.
    async def scenario(api: Api) -> None:
        statuses = [(await api.get(f"{API}/tenants")).status for _ in range(6)]
        assert statuses.count(200) == 1
        assert statuses.count(429) == 5
        refused = await api.get(f"{API}/tenants")
        assert_error(refused, 429, "path")
        assert int(refused.headers["Retry-After"]) >= 1

        # Another URI has its own budget ...
        assert (await api.get(f"{API}/limits")).status == 200
        # ... but another id on one route pattern does not.
        assert (await api.get(f"{API}/sessions/c1")).status == 200
        assert_error(await api.get(f"{API}/sessions/c2"), 429, "path")
        assert api.server.rate_limit.refused[f"{API}/tenants"] == 6
        assert api.server.rate_limit.refused[f"{API}/sessions/{{client_id}}"] == 1

    admin(scenario, uri_rate=0.01, rate_wait=0.0, setup=populated)


def test_rate_limit_comes_before_the_token(admin: RunAdmin) -> None:
    # A burst of one per route: the first unauthenticated request is judged on its
    # token (401), every later one is refused on rate alone (429) and counted.
    async def scenario(api: Api) -> None:
        answers = [await api.get(f"{API}/limits", token=token) for token in (None, "bad", None)]
        assert_error(answers[0], 401, "Authorization")
        for answer in answers[1:]:
            assert_error(answer, 429, "path")
            assert "WWW-Authenticate" not in answer.headers
        # The flood spent the route's budget: the right token waits like anyone else.
        assert_error(await api.get(f"{API}/limits"), 429, "path")
        assert api.server.rate_limit.refused[f"{API}/limits"] == 3
        # Public routes and unknown paths are limited too, each on its own budget.
        for path in ("/health", "/openapi.json"):
            assert (await api.get(path, token=None)).status == 200
            assert_error(await api.get(path, token=None), 429, "path")
        assert_error(await api.get("/nothing", token=None), 401, "Authorization")
        assert_error(await api.get("/nothing/else", token=None), 429, "path")
        text = (await api.call("GET", "/metrics")).body
        assert 'mqttq_admin_requests_refused_total{route="/api/v1/limits"} 3.0' in text
        assert 'mqttq_admin_requests_refused_total{route="/health"} 1.0' in text
        assert 'mqttq_admin_requests_refused_total{route="unmatched"} 1.0' in text

    admin(scenario, uri_rate=0.01, rate_wait=0.0)


def test_rate_limit_lets_requests_wait_for_a_token(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        answers = await asyncio.gather(*(api.get(f"{API}/limits") for _ in range(30)))
        assert [a.status for a in answers] == [200] * 30
        assert api.server.rate_limit.refused[f"{API}/limits"] == 0

    admin(scenario, uri_rate=25.0, rate_wait=30.0)


def test_refused_requests_reach_the_metrics(admin: RunAdmin) -> None:
    async def scenario(api: Api) -> None:
        for _ in range(3):
            await api.get(f"{API}/credentials")
        text = (await api.get("/metrics")).body
        assert 'mqttq_admin_requests_refused_total{route="/api/v1/credentials"} 2.0' in text
        assert 'mqttq_admin_requests_refused_total{route="/api/v1/tenants"} 0.0' in text

    admin(scenario, uri_rate=0.01, rate_wait=0.0)


def test_rate_limit_is_per_client_address(admin: RunAdmin) -> None:
    # A burst of one per route and address: a flood from 127.0.0.1 spends its own budget,
    # and a caller on 127.0.0.2 (loopback too) still gets its answer.
    async def scenario(api: Api) -> None:
        flood = [(await api.get(f"{API}/limits")).status for _ in range(5)]
        assert flood == [200, 429, 429, 429, 429]
        connector = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
        async with aiohttp.ClientSession(connector=connector) as other:
            async with other.get(
                api.server.url + f"{API}/limits", headers={"Authorization": f"Bearer {TOKEN}"}
            ) as answer:
                assert answer.status == 200
            async with other.get(
                api.server.url + f"{API}/limits", headers={"Authorization": f"Bearer {TOKEN}"}
            ) as answer:
                assert answer.status == 429
        assert api.server.rate_limit.refused[f"{API}/limits"] == 5

    admin(scenario, uri_rate=0.01, rate_wait=0.0)
