"""ConsumerGroupDescribe (69), v0–1: a KIP-848 group's epochs, members, and their assignments.

A group id that is not a consumer group answers GROUP_ID_NOT_FOUND for that group, as Kafka does
(``DescribeGroups`` describes classic groups). v1 adds each member's type (1: consumer protocol,
0: a classic member that joined with JoinGroup).
Authorized operations (KIP-430), when asked for, are every group operation: kompakt has no
authorizer, and Kafka without one allows them all.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.authorized_operations import NOT_REQUESTED, authorized_operations
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.error_codes import error_code_for
from kompakt.broker.groups.errors import GroupError
from kompakt.broker.groups.records.schemas import Assignment
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import consumer_group_describe as m

#: ``ConsumerGroupDescribeResponse.Member.MemberType`` of a classic-protocol member (a classic
#: consumer that joined the group, KIP-848's online migration) and of a consumer-protocol member.
CLASSIC_MEMBER_TYPE, CONSUMER_MEMBER_TYPE = 0, 1


def _assignment(assignment: Assignment, names: Mapping[uuid.UUID, str]) -> m.Assignment:
    return m.Assignment(
        topic_partitions=[
            m.TopicPartitions(topic_id=topic_id, topic_name=names.get(topic_id, ""), partitions=sorted(parts))
            for topic_id, parts in sorted(assignment.items())
        ]
    )


def _described(
    ctx: RequestContext, group_id: str, include_operations: bool, names: Mapping[uuid.UUID, str]
) -> m.DescribedGroup:
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return m.DescribedGroup(
            error_code=codec.ErrorCode.group_authorization_failed,
            error_message=None,
            group_id=group_id,
            group_state="",
            group_epoch=0,
            assignment_epoch=0,
            assignor_name="",
            members=[],
            authorized_operations=NOT_REQUESTED,
        )
    operations = (
        authorized_operations(ctx, ResourceType.GROUP, group_id) if include_operations else NOT_REQUESTED
    )
    try:
        described = ctx.broker.groups.consumer_group_describe(group_id)
    except GroupError as exc:
        return m.DescribedGroup(
            error_code=error_code_for(exc),
            error_message=str(exc),
            group_id=group_id,
            group_state="Dead",
            group_epoch=0,
            assignment_epoch=0,
            assignor_name="",
            members=[],
            authorized_operations=operations,
        )
    return m.DescribedGroup(
        error_code=codec.ErrorCode.none,
        group_id=group_id,
        group_state=described.state,
        group_epoch=described.group_epoch,
        assignment_epoch=described.assignment_epoch,
        assignor_name=described.assignor_name,
        members=[
            m.Member(
                member_id=member.member_id,
                instance_id=member.instance_id,
                rack_id=member.rack_id,
                member_epoch=member.member_epoch,
                client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=member.subscribed_topic_names,
                subscribed_topic_regex=member.subscribed_topic_regex,
                assignment=_assignment(member.assignment, names),
                target_assignment=_assignment(member.target_assignment, names),
                member_type=CLASSIC_MEMBER_TYPE if member.classic else CONSUMER_MEMBER_TYPE,
            )
            for member in described.members
        ],
        authorized_operations=operations,
    )


def handle(ctx: RequestContext, request: m.ConsumerGroupDescribeRequest) -> m.ConsumerGroupDescribeResponse:
    names = ctx.broker.groups.topic_names()
    include = request.include_authorized_operations
    return m.ConsumerGroupDescribeResponse(
        groups=[_described(ctx, group_id, include, names) for group_id in request.group_ids]
    )


SPEC = HandlerSpec(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, handle)
