"""DeleteTopics (20), v1–6: delete topics by name, and from v6 by topic id.

With ``delete.topic.enable=false`` every topic is refused: TOPIC_DELETION_DISABLED from v3, and
INVALID_REQUEST before (that error code did not exist yet), as Kafka does. In v6 an entry names a
topic *or* an id; both, neither, or the same topic twice is INVALID_REQUEST with Kafka's message.
``__consumer_offsets`` cannot be deleted (kompakt's offset store lives in it; see topic_admin).

Before the log manager removes the partitions, every callable in the optional broker attribute
``on_topic_deleted`` is called as ``hook(topic, partitions)``; the cleaner registers one there to
abort cleaning of those partitions first.
"""

from __future__ import annotations

import uuid

from kompakt.broker import topic_admin
from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.per_item import answer_each
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import delete_topics as m

_ZERO = topic_admin.ZERO_UUID


def _result(
    name: str | None, topic_id: uuid.UUID, code: codec.ErrorCode, message: str | None
) -> m.DeletableTopicResult:
    return m.DeletableTopicResult(name=name, topic_id=topic_id, error_code=code, error_message=message)


def _entries(ctx: RequestContext, request: m.DeleteTopicsRequest) -> list[tuple[str | None, uuid.UUID]]:
    if ctx.api_version >= 6:
        return [(t.name, t.topic_id or _ZERO) for t in request.topics]
    return [(name, _ZERO) for name in request.topic_names]


def handle(ctx: RequestContext, request: m.DeleteTopicsRequest) -> m.DeleteTopicsResponse:
    broker = ctx.broker
    entries = _entries(ctx, request)
    results: list[m.DeletableTopicResult] = []
    if not broker.broker_config.delete_topic_enable:
        code = (
            codec.ErrorCode.topic_deletion_disabled
            if ctx.api_version >= 3
            else codec.ErrorCode.invalid_request
        )
        for name, topic_id in entries:
            results.append(_result(name, topic_id, code, "Topic deletion is disabled."))
        return m.DeleteTopicsResponse(responses=results)

    logs = broker.logs
    by_name: list[tuple[str, uuid.UUID]] = []
    for name, topic_id in entries:
        if name is None and topic_id == _ZERO:
            results.append(
                _result(
                    None, _ZERO, codec.ErrorCode.invalid_request, "Neither topic name nor id were specified."
                )
            )
        elif name is not None and topic_id != _ZERO:
            results.append(
                _result(
                    name,
                    topic_id,
                    codec.ErrorCode.invalid_request,
                    "You may not specify both topic name and topic id.",
                )
            )
        elif name is None:
            try:
                by_name.append((topic_admin.topic_name_for_id(logs, topic_id), topic_id))
            except topic_admin.AdminError as unknown:
                results.append(_result(None, topic_id, unknown.code, unknown.message))
        else:
            by_name.append((name, _ZERO))

    hooks = list(broker.on_topic_deleted)

    def delete(entry: tuple[str, uuid.UUID]) -> m.DeletableTopicResult:
        if not ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, entry[0]):
            raise topic_admin.AdminError(codec.ErrorCode.topic_authorization_failed, "Authorization failed.")
        deleted_id = topic_admin.delete_topic(logs, broker.broker_config, entry[0], hooks)
        return _result(entry[0], deleted_id, codec.ErrorCode.none, None)

    def fail(entry: tuple[str, uuid.UUID], error: topic_admin.AdminError) -> m.DeletableTopicResult:
        return _result(entry[0], entry[1], error.code, error.message)

    results += answer_each(by_name, lambda entry: entry[0], delete, fail, duplicate="Duplicate topic name.")
    return m.DeleteTopicsResponse(responses=results)


SPEC = HandlerSpec(ApiKey.DELETE_TOPICS, 1, 6, handle, blocking=True)
