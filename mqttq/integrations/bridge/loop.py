"""Loop prevention: the `mqttq-bridge` user property, and who may move a message.

The rule (docs/integrations/mqtt.md shows it with two bridges forming a loop):
- `direction = "in"` republishes a remote message locally with the user property
  `mqttq-bridge = <the bridge's integration name>` (any earlier `mqttq-bridge` property is
  replaced, so a message carries one);
- `direction = "out"` sends a message to the remote with `mqttq-bridge = <its client id>`
  (MQTT 5.0 remotes; a 3.1.1 PUBLISH has no properties);
- an out bridge never exports a message that carries `mqttq-bridge`: it came in through a
  bridge or was exported by another mqttq bridge, so each message crosses at most one
  out-then-in pair of bridges and cannot circulate;
- an in bridge drops a remote message whose `mqttq-bridge` names one of its broker's own
  out bridges (`own_origins`, their client ids): that is our own export coming back.
Client ids are unique at a remote broker (two connections with one id take each other's
session over), which is why the out stamp is the client id rather than the local name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

BRIDGE_PROPERTY: Final = "mqttq-bridge"


def bridge_origin(user_properties: Iterable[tuple[str, str]]) -> str | None:
    """The value of the `mqttq-bridge` user property, None when the message has none."""
    for key, value in user_properties:
        if key == BRIDGE_PROPERTY:
            return value
    return None


def stamped(user_properties: Iterable[tuple[str, str]], origin: str) -> list[tuple[str, str]]:
    """`user_properties` with one `mqttq-bridge = origin` in place of any earlier one."""
    kept = [(key, value) for key, value in user_properties if key != BRIDGE_PROPERTY]
    kept.append((BRIDGE_PROPERTY, origin))
    return kept
