"""ConsumerGroupDescribe (69), v0–1: a KIP-848 group's epochs, members, and their assignments.

A group id that is not a consumer group answers GROUP_ID_NOT_FOUND for that group, as Kafka does
(``DescribeGroups`` describes classic groups). v1 adds each member's type (1: consumer protocol,
0: a classic member that joined with JoinGroup).
Authorized operations (KIP-430), when asked for, are every group operation: kompakt has no
authorizer, and Kafka without one allows them all.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Protocol, cast

from kompakt.broker.authorized_operations import GROUP_AUTHORIZED_OPERATIONS, NOT_REQUESTED
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.error_codes import error_code_for
from kompakt.broker.groups.errors import GroupError
from kompakt.broker.groups.records.schemas import Assignment
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey

#: ``ConsumerGroupDescribeResponse.Member.MemberType`` of a classic-protocol member (a classic
#: consumer that joined the group, KIP-848's online migration) and of a consumer-protocol member.
CLASSIC_MEMBER_TYPE, CONSUMER_MEMBER_TYPE = 0, 1


class _Request(Protocol):
    group_ids: Sequence[str]
    include_authorized_operations: bool


def _assignment(assignment: Assignment, names: Mapping[uuid.UUID, str]) -> dict[str, object]:
    return {
        "topic_partitions": [
            {"topic_id": topic_id, "topic_name": names.get(topic_id, ""), "partitions": sorted(parts)}
            for topic_id, parts in sorted(assignment.items())
        ]
    }


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    req = cast(_Request, request)
    groups_ = ctx.broker.groups
    names = groups_.topic_names()
    operations = GROUP_AUTHORIZED_OPERATIONS if req.include_authorized_operations else NOT_REQUESTED
    groups: list[dict[str, object]] = []
    for group_id in req.group_ids:
        try:
            described = groups_.consumer_group_describe(group_id)
        except GroupError as exc:
            groups.append(
                {
                    "error_code": error_code_for(exc),
                    "error_message": str(exc),
                    "group_id": group_id,
                    "group_state": "Dead",
                    "group_epoch": 0,
                    "assignment_epoch": 0,
                    "assignor_name": "",
                    "members": [],
                    "authorized_operations": operations,
                }
            )
            continue
        groups.append(
            {
                "error_code": codec.ErrorCode.none,
                "error_message": None,
                "group_id": group_id,
                "group_state": described.state,
                "group_epoch": described.group_epoch,
                "assignment_epoch": described.assignment_epoch,
                "assignor_name": described.assignor_name,
                "members": [
                    {
                        "member_id": m.member_id,
                        "instance_id": m.instance_id,
                        "rack_id": m.rack_id,
                        "member_epoch": m.member_epoch,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "subscribed_topic_names": m.subscribed_topic_names,
                        "subscribed_topic_regex": m.subscribed_topic_regex,
                        "assignment": _assignment(m.assignment, names),
                        "target_assignment": _assignment(m.target_assignment, names),
                        "member_type": CLASSIC_MEMBER_TYPE if m.classic else CONSUMER_MEMBER_TYPE,
                    }
                    for m in described.members
                ],
                "authorized_operations": operations,
            }
        )
    return codec.build_response(request, {"groups": groups})


SPEC = HandlerSpec(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, handle)
