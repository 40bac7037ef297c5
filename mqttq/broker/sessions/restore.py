"""Sessions back from storage at start: offline, with their subscriptions, expiry clocks and
due wills; retained messages too."""

from __future__ import annotations

from mqttq.broker.sessions.endings import SessionEndings
from mqttq.broker.sessions.session import Session
from mqttq.codec.enums import SESSION_EXPIRY_NEVER
from mqttq.codec.packets import Will
from mqttq.protocol.connect import INTEGRATION_CLIENT_PREFIX

__all__ = ["restore_sessions"]


async def restore_sessions(endings: SessionEndings, max_session_expiry_interval: int) -> int:
    """Load stored sessions (offline) with their subscriptions and restart their
    expiry clocks; a session stored as connected counts as disconnected now. Stored
    wills are due again: at the end of their Will Delay Interval from the disconnect,
    or now when the session ended while the broker was down [MQTT-3.1.2-8]."""
    hub = endings.hub
    now = hub.clock()
    records = await hub.storage.load_sessions()
    due: list[tuple[str, Will, str, float]] = []
    cluster = endings.cluster
    for record in records:
        if cluster is not None:
            if cluster.owns_stored(record.client_id) is False:
                continue  # another node has it now
            cluster.adopt_restored(record.client_id)
        expiry = min(record.session_expiry_interval, max_session_expiry_interval)
        integration = record.client_id.startswith(INTEGRATION_CLIENT_PREFIX)
        if integration:
            expiry = record.session_expiry_interval  # the broker's own: the cap is for clients
        disconnected_at = record.disconnected_at
        elapsed = 0.0 if disconnected_at is None else max(0.0, now - disconnected_at)
        if expiry == 0 or (expiry < SESSION_EXPIRY_NEVER and elapsed >= expiry):
            if record.will is not None:
                due.append((record.client_id, record.will, record.tenant, 0.0))
            hub.tasks.spawn(
                hub.storage.delete_session(record.client_id), "delete_session", record.client_id
            )
            continue
        space = hub.space(record.tenant)
        session = Session(
            hub,
            record.client_id,
            record.protocol_level,
            expiry,
            space,
            record.client_type,
        )
        session.restored = True
        session.disconnected_at = now if disconnected_at is None else disconnected_at
        session.awaiting_pubrel = set(record.awaiting_pubrel) or None
        if record.will is not None:
            session.will = record.will
            will_delay = record.will.properties.will_delay_interval or 0
            remaining = min(will_delay - elapsed, expiry - elapsed)
            due.append((record.client_id, record.will, record.tenant, remaining))
        hub.sessions[record.client_id] = session
        # What was stored before a limit was lowered still counts: past the limit.
        hub.limits.acquire_session(record.tenant, force=True)
        for subscription in record.subscriptions:
            space.router.subscribe(record.client_id, subscription)
            # An integration's messages go to its log once it is attached: they need no inbox.
            if subscription.qos and hub.inbox is not None and not integration:
                hub.inbox.expect_storage(record.tenant)
            space.add_topic_ref(space.topic_of(subscription.topic_filter), force=True)
        if (
            disconnected_at is None
            or expiry != record.session_expiry_interval
            or cluster is not None
        ):
            hub.save_session(session)
        endings.schedule_expiry(session, expiry - elapsed)
    stored_retained = [] if cluster is not None else await hub.storage.load_retained(now)
    for tenant, message in stored_retained:  # in a cluster: replicated already
        space = hub.space(tenant)
        if space.retained.get(message.topic) is None:
            space.add_topic_ref(message.topic, force=True)
        space.retained.set(message.topic, message)
    for client_id, will, tenant, delay in due:  # sessions and retained are all back
        endings.wills.connection_closed(client_id, will, delay, tenant)
    return len(hub.sessions)
