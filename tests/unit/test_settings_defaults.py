"""The `[mqtt]` defaults are the protocol layer's: one place to change each of them."""

from __future__ import annotations

import dataclasses

import pytest

from mqttq.config.schema import MqttSettings
from mqttq.protocol.connect import ConnectPolicy
from mqttq.protocol.connection import ConnectionLimits

_MQTT_FIELDS = {f.name for f in dataclasses.fields(MqttSettings)}


@pytest.mark.parametrize(
    "defaults", [ConnectionLimits(), ConnectPolicy()], ids=lambda defaults: type(defaults).__name__
)
def test_every_shared_key_defaults_to_the_protocol_value(
    defaults: ConnectionLimits | ConnectPolicy,
) -> None:
    shared = [f.name for f in dataclasses.fields(defaults) if f.name in _MQTT_FIELDS]
    assert shared, "no key shared with [mqtt]"
    settings = MqttSettings()
    for name in shared:
        assert getattr(settings, name) == getattr(defaults, name), name
