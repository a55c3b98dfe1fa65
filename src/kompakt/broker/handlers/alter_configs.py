"""AlterConfigs (33), v0–2: replace the whole override set of a topic, a dynamic broker layer or a
group's configs (GROUP resources, as Kafka 4 takes them).

Legacy semantics: the configs sent become the complete set of overrides; anything not sent is
removed. Resources are answered one by one; a resource named twice is INVALID_REQUEST.
IncrementalAlterConfigs is the API clients should prefer; this one exists for older tools.
"""

from __future__ import annotations

from kompakt.broker import topic_admin
from kompakt.broker.acl.checks import check_config_resource
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.per_item import answer_each
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import alter_configs as m


def _answer(
    resource: m.AlterConfigsResource, error: topic_admin.AdminError | None = None
) -> m.AlterConfigsResourceResponse:
    return m.AlterConfigsResourceResponse(
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        error_code=codec.ErrorCode.none if error is None else error.code,
        error_message=None if error is None else error.message,
    )


def handle(ctx: RequestContext, request: m.AlterConfigsRequest) -> m.AlterConfigsResponse:
    def replace(resource: m.AlterConfigsResource) -> m.AlterConfigsResourceResponse:
        check_config_resource(ctx, int(resource.resource_type), resource.resource_name, alter=True)
        topic_admin.alter_resource(
            ctx.broker,
            int(resource.resource_type),
            resource.resource_name,
            replace=[(c.name, c.value) for c in resource.configs],
            validate_only=request.validate_only,
        )
        return _answer(resource)

    responses = answer_each(
        request.resources,
        lambda r: (int(r.resource_type), r.resource_name),
        replace,
        _answer,
        duplicate="Duplicate resource.",
        duplicate_answered_once=False,
    )
    return m.AlterConfigsResponse(responses=responses)


SPEC = HandlerSpec(ApiKey.ALTER_CONFIGS, 0, 2, handle, blocking=True)
