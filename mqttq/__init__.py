"""mqttq: an MQTT 3.1 / 3.1.1 / 5.0 broker and operations toolkit."""

from __future__ import annotations

import os

from mqttq import build

__version__ = "0.1.0"
__all__ = ["__version__"]

if os.environ.get(build.PURE_ENV) == "1":
    build.use_sources()  # pure Python whatever is built (a test of both builds, a debugger)
else:
    # An edited source whose old mypyc extension would run instead: warn (a few stats).
    build.check()
