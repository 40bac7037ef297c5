"""protocol layer."""

from __future__ import annotations
