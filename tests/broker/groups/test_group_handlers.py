"""The group handlers at their lowest and highest versions, through real wire bytes."""

from __future__ import annotations

from typing import Any

import pytest

from kompakt.broker.deferred import Deferred
from kompakt.broker.dispatch import Dispatcher
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from tests.support.wire import call, request_bytes

JOIN = {
    "group_id": "g",
    "session_timeout": 10_000,
    "rebalance_timeout": 20_000,
    "member_id": "",
    "protocol_type": "consumer",
    "protocols": [{"name": "range", "metadata": b"subscription"}],
}


def join(dispatcher: Dispatcher, version: int, values: dict[str, object]) -> Any:
    """JoinGroup with the KIP-394 round trip (v4+: MEMBER_ID_REQUIRED and an id first)."""
    joined = call(dispatcher, ApiKey.JOIN_GROUP, version, values)
    if version >= 4 and not values.get("member_id"):
        assert joined.error_code == E.member_id_required and joined.generation_id == -1
        joined = call(dispatcher, ApiKey.JOIN_GROUP, version, values | {"member_id": joined.member_id})
    return joined


# (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups, DeleteGroups)
VERSION_SETS = [(0, 0, 0, 0, 0, 0, 0), (5, 3, 3, 1, 2, 1, 1), (7, 5, 4, 5, 5, 4, 2), (9, 5, 4, 5, 6, 5, 2)]


@pytest.mark.parametrize(("join_v", "sync_v", "hb_v", "leave_v", "desc_v", "list_v", "del_v"), VERSION_SETS)
def test_full_cycle(
    dispatcher: Dispatcher,
    join_v: int,
    sync_v: int,
    hb_v: int,
    leave_v: int,
    desc_v: int,
    list_v: int,
    del_v: int,
) -> None:
    joined = join(dispatcher, join_v, JOIN)
    assert joined.error_code == E.none
    member, generation = joined.member_id, joined.generation_id
    assert joined.leader == member and generation == 1
    assert [(m.member_id, m.metadata) for m in joined.members] == [(member, b"subscription")]
    if join_v >= 7:
        assert joined.protocol_type == "consumer"

    sync = {
        "group_id": "g",
        "generation_id": generation,
        "member_id": member,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": member, "assignment": b"my-partitions"}],
    }
    synced = call(dispatcher, ApiKey.SYNC_GROUP, sync_v, sync)
    assert (synced.error_code, synced.assignment) == (E.none, b"my-partitions")
    if sync_v >= 5:
        assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")

    beat = call(
        dispatcher,
        ApiKey.HEARTBEAT,
        hb_v,
        {"group_id": "g", "generation_id": generation, "member_id": member},
    )
    assert beat.error_code == E.none

    described = call(
        dispatcher,
        ApiKey.DESCRIBE_GROUPS,
        desc_v,
        {"groups": ["g", "nope"], "include_authorized_operations": False},
    )
    g, nope = described.groups
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert (g.members[0].member_id, g.members[0].member_assignment) == (member, b"my-partitions")
    assert (g.members[0].client_id, g.members[0].client_host) == ("test-client", "/127.0.0.1")  # Kafka's form
    assert nope.group_state == "Dead"

    listed = call(dispatcher, ApiKey.LIST_GROUPS, list_v, {"states_filter": ["Stable"]})
    assert [(x.group_id, x.protocol_type) for x in listed.groups] == [("g", "consumer")]
    if list_v >= 4:
        assert listed.groups[0].group_state == "Stable"
        assert call(dispatcher, ApiKey.LIST_GROUPS, list_v, {"states_filter": ["Empty"]}).groups == ()

    deleted = call(dispatcher, ApiKey.DELETE_GROUPS, del_v, {"groups_names": ["g"]})
    assert deleted.results[0].error_code == E.non_empty_group

    leave = {"group_id": "g", "member_id": member, "members": [{"member_id": member}]}
    left = call(dispatcher, ApiKey.LEAVE_GROUP, leave_v, leave)
    assert left.error_code == E.none
    if leave_v >= 3:
        assert [(m.member_id, m.error_code) for m in left.members] == [(member, E.none)]

    deleted = call(dispatcher, ApiKey.DELETE_GROUPS, del_v, {"groups_names": ["g"]})
    assert deleted.results[0].error_code == E.none


def test_leave_v0_unknown_member_is_a_top_level_error(dispatcher: Dispatcher) -> None:
    left = call(dispatcher, ApiKey.LEAVE_GROUP, 0, {"group_id": "g", "member_id": "ghost"})
    assert left.error_code == E.unknown_member_id


def test_join_of_a_second_member_is_deferred_until_the_leader_rejoins(dispatcher: Dispatcher) -> None:
    leader = join(dispatcher, 5, JOIN)
    required = call(dispatcher, ApiKey.JOIN_GROUP, 5, JOIN)
    second = JOIN | {"member_id": required.member_id}
    request = dispatcher.decode(request_bytes(ApiKey.JOIN_GROUP, 5, second)[4:])
    pending = dispatcher.call(dispatcher.context(request, "h"), request.body)
    assert isinstance(pending, Deferred) and not pending.done
    rejoined = call(dispatcher, ApiKey.JOIN_GROUP, 5, JOIN | {"member_id": leader.member_id})
    assert rejoined.generation_id == 2 and len(rejoined.members) == 2
    follower = pending.result()
    assert follower.generation_id == 2  # type: ignore[union-attr]
    assert follower.members == ()  # type: ignore[union-attr]
