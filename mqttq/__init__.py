"""mqttq: an MQTT 3.1 / 3.1.1 / 5.0 broker and operations toolkit."""

from __future__ import annotations

from mqttq import build

__version__ = "0.1.0"
__all__ = ["__version__"]

# An edited source whose old mypyc extension would run instead: warn at once (a few stats).
build.check()
