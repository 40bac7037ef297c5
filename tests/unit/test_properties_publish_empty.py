"""`Properties.empty_for_publish` agrees with the property table, one case per property."""

from __future__ import annotations

from typing import Any

import pytest

from mqttq.codec.enums import PacketType, PropertyId
from mqttq.codec.properties import (
    BINARY,
    BYTE,
    EMPTY_PROPERTIES,
    PROPERTIES_BY_CONTEXT,
    PROPERTY_TABLE,
    STRING,
    STRING_PAIR,
    U16,
    U32,
    VARINT,
    Properties,
    PropertySpec,
    encode_properties,
)

_SAMPLES: dict[int, Any] = {
    BYTE: 1,
    U16: 1,
    U32: 1,
    VARINT: 1,
    STRING: "x",
    BINARY: b"x",
    STRING_PAIR: ("k", "v"),
}
_LISTS = {PropertyId.SUBSCRIPTION_IDENTIFIER, PropertyId.USER_PROPERTY}
_IN_PUBLISH = {spec.identifier for spec in PROPERTIES_BY_CONTEXT[PacketType.PUBLISH]}


def _with_only(spec: PropertySpec) -> Properties:
    value = _SAMPLES[spec.wire]
    return Properties(**{spec.name: [value] if spec.identifier in _LISTS else value})


def test_an_empty_properties_is_empty_for_publish() -> None:
    assert Properties().empty_for_publish()


@pytest.mark.parametrize("spec", list(PROPERTY_TABLE.values()), ids=lambda spec: spec.name)
def test_each_property_counts_exactly_when_a_publish_may_carry_it(spec: PropertySpec) -> None:
    props = _with_only(spec)
    assert props.empty_for_publish() is (spec.identifier not in _IN_PUBLISH)
    # And what it says is what the encoder writes: nothing, or the property.
    encoded = encode_properties(props, PacketType.PUBLISH)
    assert (encoded == EMPTY_PROPERTIES) is props.empty_for_publish()
