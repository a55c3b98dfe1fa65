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
from collections import Counter
from collections.abc import Iterable

from kompakt.broker import topic_admin
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey

_ZERO = topic_admin.ZERO_UUID


def _result(
    name: str | None, topic_id: uuid.UUID, code: codec.ErrorCode, message: str | None
) -> dict[str, object]:
    return {"name": name, "topic_id": topic_id, "error_code": code, "error_message": message}


def _entries(ctx: RequestContext, request: codec.RequestPayload) -> Iterable[tuple[str | None, uuid.UUID]]:
    if ctx.api_version >= 6:
        return [(t.name, t.topic_id or _ZERO) for t in getattr(request, "topics", ())]
    return [(name, _ZERO) for name in getattr(request, "topic_names", ())]


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    broker = ctx.broker
    entries = list(_entries(ctx, request))
    results: list[dict[str, object]] = []
    if not broker.broker_config.delete_topic_enable:
        code = (
            codec.ErrorCode.topic_deletion_disabled
            if ctx.api_version >= 3
            else codec.ErrorCode.invalid_request
        )
        for name, topic_id in entries:
            results.append(_result(name, topic_id, code, "Topic deletion is disabled."))
        return codec.build_response(request, {"responses": results})

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

    counts = Counter(name for name, _ in by_name)
    reported: set[str] = set()
    hooks = list(getattr(broker, "on_topic_deleted", ()))
    for name, topic_id in by_name:
        if counts[name] > 1:
            if name not in reported:
                reported.add(name)
                results.append(
                    _result(name, topic_id, codec.ErrorCode.invalid_request, "Duplicate topic name.")
                )
            continue
        try:
            deleted_id = topic_admin.delete_topic(logs, broker.broker_config, name, hooks)
        except Exception as exc:  # noqa: BLE001 - every failure answers this topic only
            error = topic_admin.as_admin_error(exc)
            results.append(_result(name, topic_id, error.code, error.message))
            continue
        results.append(_result(name, deleted_id, codec.ErrorCode.none, None))
    return codec.build_response(request, {"responses": results})


SPEC = HandlerSpec(ApiKey.DELETE_TOPICS, 1, 6, handle, blocking=True)
