"""What an operator sees of an APPLICATION session: its Kafka topic, the offset its
consumer committed, the topic's end, the lag between them, and the unacknowledged packet
ids saved at its last disconnect (or in flight now). Used by the admin API (live broker)
and by `mqttq session ls|inspect --application` (no broker needed)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from mqttq.errors import MqttqError
from mqttq.model import AppContext, Unacked
from mqttq.storage.kafka.app_topics import app_group, app_topic
from mqttq.storage.kafka.client import KafkaAdmin, TopicPartition

__all__ = ["AppSessionView", "describe_app_session"]


@dataclass(slots=True)
class AppSessionView:
    """One APPLICATION session for operators."""

    client_id: str
    topic: str
    committed_offset: int | None = None
    """Next record its consumer reads (None: nothing committed yet)."""
    end_offset: int | None = None
    unacked: list[Unacked] = field(default_factory=list)
    pack_offset: int | None = None
    updated_at: float = 0.0
    """When the context was last saved (connect or disconnect)."""
    connected: bool | None = None
    """None when not known (read without the broker)."""
    error: str | None = None
    """Why the Kafka offsets could not be read, if they could not."""

    @property
    def lag(self) -> int | None:
        """Records in the topic not consumed yet."""
        if self.end_offset is None:
            return None
        return max(0, self.end_offset - (self.committed_offset or 0))

    def to_json(self) -> dict[str, Any]:
        return {
            "client_id": self.client_id,
            "topic": self.topic,
            "committed_offset": self.committed_offset,
            "end_offset": self.end_offset,
            "lag": self.lag,
            "unacked": [
                {"offset": u.offset, "packet_id": u.packet_id, "kind": str(u.kind)}
                for u in self.unacked
            ],
            "unacked_packet_ids": [u.packet_id for u in self.unacked],
            "pack_offset": self.pack_offset,
            "updated_at": self.updated_at,
            "updated_age_s": round(max(0.0, time.time() - self.updated_at), 3),
            "connected": self.connected,
            "error": self.error,
        }


async def describe_app_session(
    admin: KafkaAdmin, prefix: str, context: AppContext, connected: bool | None = None
) -> AppSessionView:
    """The view of the session whose saved (or live) context is `context`."""
    client_id = context.client_id
    topic = app_topic(prefix, client_id)
    view = AppSessionView(
        client_id,
        topic,
        unacked=list(context.unacked),
        pack_offset=context.offset,
        updated_at=context.updated_at,
        connected=connected,
    )
    try:
        view.committed_offset, view.end_offset = await admin.offsets(
            app_group(prefix, client_id), TopicPartition(topic, 0)
        )
    except MqttqError as error:
        view.error = str(error)
    return view
