"""Payload filters: parsing, and which payloads match (mqttq/integrations/payload_filter.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqttq.integrations.payload_filter import PayloadFilter


@pytest.mark.parametrize(
    ("text", "payload", "expected"),
    [
        ('$.kind == "alarm"', b'{"kind": "alarm"}', True),
        ('$.kind == "alarm"', b'{"kind": "info"}', False),
        ("$.temp > 30", b'{"temp": 30.5}', True),
        ("$.temp > 30", b'{"temp": 30}', False),
        ("$.temp >= 30", b'{"temp": 30}', True),
        ("$.temp < 30", b'{"temp": "29"}', False),  # a string is no number
        ('$.a.b[1] == "y"', b'{"a": {"b": ["x", "y"]}}', True),
        ('$["odd key"] == 1', b'{"odd key": 1}', True),
        ("$.flag == true", b'{"flag": 1}', False),  # JSON's true is not 1
        ("$.flag == true", b'{"flag": true}', True),
        ("$.v == null", b'{"v": null}', True),
        ("exists $.alert", b'{"alert": false}', True),
        ("exists $.alert", b'{"other": 1}', False),
        ('$.kind != "test"', b'{"kind": "prod"}', True),
        ('$.kind != "test"', b"{}", True),
        ('$.kind != "test"', b"not json", True),
        ('$.kind == "x"', b"not json", False),
        ("$.t > 1", b"\xff\xfe", False),
    ],
)
def test_matches(text: str, payload: bytes, expected: bool) -> None:
    assert PayloadFilter.parse(text).matches(payload) is expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("kind == 1", "starts with '$'"),
        ("$.kind = 1", "expected '$.path OP value'"),
        ("$.kind == alarm", "not a JSON literal"),
        ("$.kind == [1]", "compare with a string"),
        ("$.a..b == 1", "cannot read the path"),
    ],
)
def test_bad_filters_say_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("$", r"\$").replace("[", r"\[")):
        PayloadFilter.parse(text)


@given(st.integers(-(10**6), 10**6), st.integers(-(10**6), 10**6))
def test_numeric_comparisons_agree_with_python(value: int, bound: int) -> None:
    payload = json.dumps({"v": value}).encode()
    assert PayloadFilter.parse(f"$.v > {bound}").matches(payload) is (value > bound)
    assert PayloadFilter.parse(f"$.v <= {bound}").matches(payload) is (value <= bound)
    assert PayloadFilter.parse(f"$.v == {bound}").matches(payload) is (value == bound)


@given(st.binary(max_size=64))
def test_any_payload_is_answered_without_an_exception(payload: bytes) -> None:
    for text in ('$.a == "b"', "$.a > 1", "exists $.a[0]", "$.a != 2"):
        assert PayloadFilter.parse(text).matches(payload) in (True, False)
