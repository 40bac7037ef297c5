"""One module per sink type: http, kafka, postgres, mqtt (the bridge out)."""

from __future__ import annotations
