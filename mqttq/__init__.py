"""mqttq: an MQTT 3.1 / 3.1.1 / 5.0 broker and operations toolkit."""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
