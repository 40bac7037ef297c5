"""Router: which sessions get a message, and with which options (MQTT 5.0 3.3, 3.8, 4.8.2)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mqttq.errors import ProtocolError
from mqttq.model import Message, Subscription
from mqttq.routing.router import Delivery, Router


def _all_online(_client_id: str) -> bool:
    return True


def _none_online(_client_id: str) -> bool:
    return False


def _online(*client_ids: str) -> Callable[[str], bool]:
    online = set(client_ids)
    return online.__contains__


def _msg(topic: str, qos: int = 2, retain: bool = False, publisher_id: str = "pub") -> Message:
    return Message(topic=topic, payload=b"x", qos=qos, retain=retain, publisher_id=publisher_id)


def _by_client(deliveries: list[Delivery]) -> dict[str, Delivery]:
    result = {d.client_id: d for d in deliveries}
    assert len(result) == len(deliveries), "one delivery per client expected"
    return result


# --- subscription bookkeeping ----------------------------------------------------------------


def test_subscribe_new_then_replace_identical_filter_mqtt_3_8_4_3() -> None:
    router = Router()
    assert router.subscribe("c1", Subscription("a/b", qos=0)) is True
    assert router.subscribe("c1", Subscription("a/b", qos=2)) is False
    assert router.subscriptions_of("c1") == [Subscription("a/b", qos=2)]
    (delivery,) = router.route(_msg("a/b", qos=2), _all_online)
    assert delivery.qos == 2


def test_subscriptions_of_keeps_first_subscription_order() -> None:
    router = Router()
    subs = [Subscription("x"), Subscription("$share/g/y"), Subscription("z/#")]
    for sub in subs:
        router.subscribe("c1", sub)
    assert router.subscriptions_of("c1") == subs
    assert router.subscriptions_of("unknown") == []


def test_unsubscribe_stops_delivery_and_reports_existence() -> None:
    router = Router()
    router.subscribe("c1", Subscription("a/#"))
    router.subscribe("c1", Subscription("$share/g/a/#"))
    assert router.unsubscribe("c1", "a/#") is True
    assert router.unsubscribe("c1", "a/#") is False
    assert router.unsubscribe("c2", "a/#") is False
    assert [d.shared for d in router.route(_msg("a/b"), _all_online)] == [True]
    assert router.unsubscribe("c1", "$share/g/a/#") is True
    assert router.route(_msg("a/b"), _all_online) == []
    assert router.clients() == []
    assert router.shared_groups() == []


def test_remove_client_drops_all_its_subscriptions_only() -> None:
    router = Router()
    router.subscribe("c1", Subscription("a/#"))
    router.subscribe("c1", Subscription("a/+"))
    router.subscribe("c1", Subscription("$share/g/a/b"))
    router.subscribe("c2", Subscription("a/b"))
    router.subscribe("c2", Subscription("$share/g/a/b"))
    router.remove_client("c1")
    router.remove_client("never-seen")
    assert router.subscriptions_of("c1") == []
    assert router.clients() == ["c2"]
    deliveries = router.route(_msg("a/b"), _all_online)
    assert [(d.client_id, d.shared) for d in deliveries] == [("c2", False), ("c2", True)]
    router.remove_client("c2")
    assert router.route(_msg("a/b"), _all_online) == []
    assert router.shared_groups() == []


def test_invalid_shared_filter_is_rejected_before_any_change_mqtt_4_8_2_2() -> None:
    router = Router()
    with pytest.raises(ProtocolError):
        router.subscribe("c1", Subscription("$share/g"))
    assert router.clients() == []


# --- non-shared routing ----------------------------------------------------------------------


def test_single_match_delivery_fields() -> None:
    router = Router()
    router.subscribe("c1", Subscription("a/+", qos=1, subscription_identifier=7))
    assert router.route(_msg("a/b", qos=2), _all_online) == [Delivery("c1", 1, False, (7,), False)]
    assert router.route(_msg("a/b/c"), _all_online) == []


def test_granted_qos_is_min_of_message_and_subscription_mqtt_3_8_4_8() -> None:
    router = Router()
    router.subscribe("c0", Subscription("t", qos=0))
    router.subscribe("c2", Subscription("t", qos=2))
    got = _by_client(router.route(_msg("t", qos=1), _all_online))
    assert got["c0"].qos == 0
    assert got["c2"].qos == 1


def test_overlapping_subscriptions_deliver_once_at_max_qos_mqtt_3_3_4_2() -> None:
    router = Router()
    router.subscribe("c1", Subscription("a/#", qos=0))
    router.subscribe("c1", Subscription("a/+", qos=2))
    router.subscribe("c1", Subscription("a/b", qos=1))
    (delivery,) = router.route(_msg("a/b", qos=2), _all_online)
    assert delivery.client_id == "c1"
    assert delivery.qos == 2
    (delivery,) = router.route(_msg("a/b", qos=1), _all_online)
    assert delivery.qos == 1


def test_overlapping_subscriptions_carry_every_identifier_sorted_mqtt_3_3_4_3() -> None:
    """All matching subscriptions' identifiers, ascending and without duplicates."""
    router = Router()
    router.subscribe("c1", Subscription("a/#", subscription_identifier=9))
    router.subscribe("c1", Subscription("a/+", subscription_identifier=3))
    router.subscribe("c1", Subscription("+/b", subscription_identifier=9))
    router.subscribe("c1", Subscription("a/b"))  # no identifier
    router.subscribe("c1", Subscription("#", subscription_identifier=5))
    (delivery,) = router.route(_msg("a/b"), _all_online)
    assert delivery.subscription_identifiers == (3, 5, 9)


def test_identifiers_absent_when_no_subscription_has_one() -> None:
    router = Router()
    router.subscribe("c1", Subscription("a/#"))
    router.subscribe("c1", Subscription("a/b"))
    (delivery,) = router.route(_msg("a/b"), _all_online)
    assert delivery.subscription_identifiers == ()


def test_one_identifier_among_overlapping_subscriptions() -> None:
    router = Router()
    router.subscribe("c1", Subscription("a/#"))
    router.subscribe("c1", Subscription("a/b", subscription_identifier=4))
    (delivery,) = router.route(_msg("a/b"), _all_online)
    assert delivery.subscription_identifiers == (4,)


def test_several_clients_each_get_one_delivery() -> None:
    router = Router()
    for client_id in ("c1", "c2", "c3"):
        router.subscribe(client_id, Subscription("a/#", qos=1))
        router.subscribe(client_id, Subscription("a/b", qos=0))
    router.subscribe("c4", Subscription("x"))
    got = _by_client(router.route(_msg("a/b"), _all_online))
    assert sorted(got) == ["c1", "c2", "c3"]
    assert all(d.qos == 1 and not d.shared for d in got.values())


def test_retain_flag_cleared_without_retain_as_published_mqtt_3_3_1_12() -> None:
    router = Router()
    router.subscribe("c1", Subscription("t"))
    (delivery,) = router.route(_msg("t", retain=True), _all_online)
    assert delivery.retain is False


def test_retain_flag_kept_with_retain_as_published_mqtt_3_3_1_13() -> None:
    router = Router()
    router.subscribe("c1", Subscription("t", retain_as_published=True))
    (delivery,) = router.route(_msg("t", retain=True), _all_online)
    assert delivery.retain is True
    (delivery,) = router.route(_msg("t", retain=False), _all_online)
    assert delivery.retain is False


def test_retain_as_published_on_any_overlapping_subscription_keeps_retain() -> None:
    """[MQTT-3.3.1-13] for one of the overlapping subscriptions keeps the RETAIN flag."""
    router = Router()
    router.subscribe("c1", Subscription("t/#"))
    router.subscribe("c1", Subscription("t/+", retain_as_published=True))
    router.subscribe("c1", Subscription("t/x"))
    (delivery,) = router.route(_msg("t/x", retain=True), _all_online)
    assert delivery.retain is True


def test_no_local_skips_publisher_own_subscription_mqtt_3_8_3_3() -> None:
    router = Router()
    router.subscribe("me", Subscription("t", no_local=True))
    router.subscribe("other", Subscription("t", no_local=True))
    deliveries = router.route(_msg("t", publisher_id="me"), _all_online)
    assert [d.client_id for d in deliveries] == ["other"]


def test_no_local_skips_only_that_subscription_mqtt_3_8_3_3() -> None:
    """Another overlapping subscription without No Local still delivers, with its options."""
    router = Router()
    router.subscribe("me", Subscription("t/#", qos=2, no_local=True, subscription_identifier=1))
    router.subscribe("me", Subscription("t/+", qos=1, subscription_identifier=2))
    (delivery,) = router.route(_msg("t/x", qos=2, publisher_id="me"), _all_online)
    assert delivery.qos == 1
    assert delivery.subscription_identifiers == (2,)
    router.unsubscribe("me", "t/+")
    assert router.route(_msg("t/x", publisher_id="me"), _all_online) == []


def test_dollar_topics_not_routed_to_leading_wildcards_mqtt_4_7_2_1() -> None:
    router = Router()
    router.subscribe("all", Subscription("#"))
    router.subscribe("plus", Subscription("+/x"))
    router.subscribe("sys", Subscription("$SYS/#"))
    router.subscribe("shared", Subscription("$share/g/#"))
    assert [d.client_id for d in router.route(_msg("$SYS/x"), _all_online)] == ["sys"]
    assert sorted(d.client_id for d in router.route(_msg("a/x"), _all_online)) == [
        "all",
        "plus",
        "shared",
    ]


def test_hash_subscription_gets_parent_topic_mqtt_4_7_1_2() -> None:
    router = Router()
    router.subscribe("c1", Subscription("a/#"))
    assert [d.client_id for d in router.route(_msg("a"), _all_online)] == ["c1"]


# --- shared subscriptions --------------------------------------------------------------------


def _shared_router(members: list[str], topic_filter: str = "$share/g/t/#") -> Router:
    router = Router()
    for client_id in members:
        router.subscribe(client_id, Subscription(topic_filter, qos=1))
    return router


def test_shared_group_delivers_to_exactly_one_member_mqtt_4_8_2() -> None:
    router = _shared_router(["a", "b", "c"])
    deliveries = router.route(_msg("t/x"), _all_online)
    assert len(deliveries) == 1
    assert deliveries[0].shared is True
    assert deliveries[0].qos == 1


def test_shared_round_robin_in_join_order_among_online_members() -> None:
    router = _shared_router(["a", "b", "c"])
    picked = [router.route(_msg("t/x"), _all_online)[0].client_id for _ in range(7)]
    assert picked == ["a", "b", "c", "a", "b", "c", "a"]


def test_shared_round_robin_skips_offline_members() -> None:
    router = _shared_router(["a", "b", "c"])
    online = _online("a", "c")
    picked = [router.route(_msg("t/x"), online)[0].client_id for _ in range(4)]
    assert picked == ["a", "c", "a", "c"]


def test_shared_falls_back_to_offline_members_round_robin() -> None:
    """No member online: the message still goes to one member (queued in its session)."""
    router = _shared_router(["a", "b", "c"])
    picked = [router.route(_msg("t/x"), _none_online)[0].client_id for _ in range(4)]
    assert picked == ["a", "b", "c", "a"]


def test_shared_member_removal_keeps_rotation() -> None:
    router = _shared_router(["a", "b", "c", "d"])
    assert router.route(_msg("t/x"), _all_online)[0].client_id == "a"
    assert router.route(_msg("t/x"), _all_online)[0].client_id == "b"
    router.remove_client("a")  # before the cursor
    assert router.route(_msg("t/x"), _all_online)[0].client_id == "c"
    router.unsubscribe("d", "$share/g/t/#")  # the next in turn
    assert router.route(_msg("t/x"), _all_online)[0].client_id == "b"
    router.subscribe("e", Subscription("$share/g/t/#"))
    picked = [router.route(_msg("t/x"), _all_online)[0].client_id for _ in range(4)]
    assert picked == ["c", "e", "b", "c"]


def test_shared_resubscribe_replaces_options_and_keeps_turn_mqtt_3_8_4_3() -> None:
    router = _shared_router(["a", "b"])
    assert router.subscribe("a", Subscription("$share/g/t/#", qos=0)) is False
    first, second = (router.route(_msg("t/x", qos=2), _all_online)[0] for _ in range(2))
    assert (first.client_id, first.qos) == ("a", 0)
    assert (second.client_id, second.qos) == ("b", 1)


def test_each_matching_group_delivers_once() -> None:
    router = Router()
    router.subscribe("a", Subscription("$share/g1/t/#"))
    router.subscribe("b", Subscription("$share/g1/t/#"))
    router.subscribe("c", Subscription("$share/g2/t/#"))
    router.subscribe("d", Subscription("$share/g1/t/+"))  # another (group, filter) pair
    router.subscribe("e", Subscription("$share/g1/other"))
    deliveries = router.route(_msg("t/x"), _all_online)
    assert sorted(d.client_id for d in deliveries) == ["a", "c", "d"]
    assert all(d.shared for d in deliveries)


def test_shared_delivery_uses_member_options() -> None:
    """QoS min(message, member) [MQTT-3.8.4-8]; identifier of the member's subscription."""
    router = Router()
    router.subscribe("a", Subscription("$share/g/t", qos=0, subscription_identifier=11))
    (delivery,) = router.route(_msg("t", qos=2), _all_online)
    assert delivery == Delivery("a", 0, False, (11,), True)


def test_shared_retain_follows_retain_as_published_mqtt_3_3_1_12_13() -> None:
    """The spec's Retain As Published rules make no exception for shared subscriptions."""
    router = Router()
    router.subscribe("a", Subscription("$share/g/t", retain_as_published=True))
    router.subscribe("b", Subscription("$share/h/t"))
    got = _by_client(router.route(_msg("t", retain=True), _all_online))
    assert got["a"].retain is True
    assert got["b"].retain is False


def test_no_local_ignored_on_shared_subscription_mqtt_3_8_3_4() -> None:
    """No Local on a shared subscription is a Protocol Error rejected upstream; ignored here."""
    router = Router()
    router.subscribe("me", Subscription("$share/g/t", no_local=True))
    (delivery,) = router.route(_msg("t", publisher_id="me"), _all_online)
    assert delivery.client_id == "me"


def test_client_with_shared_and_plain_subscription_gets_both() -> None:
    router = Router()
    router.subscribe("c1", Subscription("t/#", qos=2, subscription_identifier=1))
    router.subscribe("c1", Subscription("$share/g/t/#", qos=0, subscription_identifier=2))
    deliveries = router.route(_msg("t/x", qos=2), _all_online)
    assert deliveries == [
        Delivery("c1", 2, False, (1,), False),
        Delivery("c1", 0, False, (2,), True),
    ]


def test_group_and_client_with_same_name_do_not_collide() -> None:
    router = Router()
    router.subscribe("g", Subscription("t"))
    router.subscribe("x", Subscription("$share/g/t"))
    deliveries = router.route(_msg("t"), _all_online)
    assert [(d.client_id, d.shared) for d in deliveries] == [("g", False), ("x", True)]
    router.unsubscribe("x", "$share/g/t")
    assert [(d.client_id, d.shared) for d in router.route(_msg("t"), _all_online)] == [("g", False)]
