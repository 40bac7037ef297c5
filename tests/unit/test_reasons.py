"""The reason codes sit on the ground floor: errors need them, the codec re-exports them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import mqttq.codec
import mqttq.codec.enums
from mqttq.errors import MalformedPacket, PacketTooLarge
from mqttq.reasons import ConnackReturnCode, ReasonCode


def _modules_loaded_by(module: str) -> list[str]:
    """The mqttq modules a fresh interpreter has loaded after importing `module` alone."""
    script = (
        f"import json, sys, {module};"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('mqttq'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "MQTTQ_PURE": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def test_errors_import_nothing_above_the_ground_floor() -> None:
    # Before the move, mqttq.errors imported mqttq.codec.enums (and so the codec package).
    loaded = _modules_loaded_by("mqttq.errors")
    assert [m for m in loaded if m.startswith("mqttq.codec")] == []
    assert "mqttq.reasons" in loaded


def test_the_codec_package_loads_its_names_eagerly() -> None:
    loaded = _modules_loaded_by("mqttq.codec")
    for module in ("reader", "writer", "packets", "properties"):
        assert f"mqttq.codec.{module}" in loaded


def test_old_import_paths_name_the_same_enums() -> None:
    assert mqttq.codec.enums.ReasonCode is ReasonCode
    assert mqttq.codec.ReasonCode is ReasonCode
    assert mqttq.codec.enums.ConnackReturnCode is ConnackReturnCode
    assert mqttq.codec.ConnackReturnCode is ConnackReturnCode


def test_errors_carry_their_reason_code() -> None:
    assert MalformedPacket("x").reason_code is ReasonCode.MALFORMED_PACKET
    assert PacketTooLarge("x").reason_code is ReasonCode.PACKET_TOO_LARGE
