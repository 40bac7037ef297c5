"""Limits: quotas, token buckets, count limits and the two-layer (node, tenant) limiter.

Pure logic (time is passed in). See mqttq.limits.limiter for the two layers.
"""

from __future__ import annotations

from mqttq.limits.bucket import TokenBucket
from mqttq.limits.counter import CountLimit
from mqttq.limits.limiter import NO_TENANT, Layer, Limits, Reason, Refused
from mqttq.limits.quota import DEFAULT_NODE_QUOTA, QUOTA_FIELDS, Quota, QuotaError

__all__ = [
    "DEFAULT_NODE_QUOTA",
    "NO_TENANT",
    "QUOTA_FIELDS",
    "CountLimit",
    "Layer",
    "Limits",
    "Quota",
    "QuotaError",
    "Reason",
    "Refused",
    "TokenBucket",
]
