"""IncrementalAlterConfigs (44), v0–1: SET / DELETE / APPEND / SUBTRACT on topic, broker or group
configs.

Operations apply to the current override set (a topic's overrides, this broker's or the
cluster-default dynamic layer, or a group's configs: ``consumer.session.timeout.ms`` and the
others of Kafka 4.1's ``GroupConfig``); APPEND and SUBTRACT only work on LIST configs such as
``cleanup.policy`` (INVALID_CONFIG otherwise, which is every group config). The result is
validated as a whole before anything changes. Resources are answered one by one; a resource named
twice is INVALID_REQUEST.
"""

from __future__ import annotations

from kompakt.broker import topic_admin
from kompakt.broker.acl.checks import check_config_resource
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.per_item import answer_each
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import incremental_alter_configs as m


def _answer(
    resource: m.AlterConfigsResource, error: topic_admin.AdminError | None = None
) -> m.AlterConfigsResourceResponse:
    return m.AlterConfigsResourceResponse(
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        error_code=codec.ErrorCode.none if error is None else error.code,
        error_message=None if error is None else error.message,
    )


def handle(
    ctx: RequestContext, request: m.IncrementalAlterConfigsRequest
) -> m.IncrementalAlterConfigsResponse:
    def apply(resource: m.AlterConfigsResource) -> m.AlterConfigsResourceResponse:
        check_config_resource(ctx, int(resource.resource_type), resource.resource_name, alter=True)
        ops = [topic_admin.ConfigOp(c.name, int(c.config_operation), c.value) for c in resource.configs]
        topic_admin.alter_resource(
            ctx.broker,
            int(resource.resource_type),
            resource.resource_name,
            ops=ops,
            validate_only=request.validate_only,
        )
        return _answer(resource)

    responses = answer_each(
        request.resources,
        lambda r: (int(r.resource_type), r.resource_name),
        apply,
        _answer,
        duplicate="Duplicate resource.",
        duplicate_answered_once=False,
    )
    return m.IncrementalAlterConfigsResponse(responses=responses)


SPEC = HandlerSpec(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, handle, blocking=True)
