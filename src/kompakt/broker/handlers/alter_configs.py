"""AlterConfigs (33), v0–2: replace the whole override set of a topic, a dynamic broker layer or a
group's configs (GROUP resources, as Kafka 4 takes them).

Legacy semantics: the configs sent become the complete set of overrides; anything not sent is
removed. Resources are answered one by one; a resource named twice is INVALID_REQUEST.
IncrementalAlterConfigs is the API clients should prefer; this one exists for older tools.
"""

from __future__ import annotations

from collections import Counter

from kompakt.broker import topic_admin
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    validate_only: bool = getattr(request, "validate_only", False)
    resources = getattr(request, "resources", ())
    counts = Counter((int(r.resource_type), r.resource_name) for r in resources)
    responses: list[dict[str, object]] = []
    for resource in resources:
        resource_type, name = int(resource.resource_type), resource.resource_name
        result: dict[str, object] = {"resource_type": resource_type, "resource_name": name}
        try:
            if counts[(resource_type, name)] > 1:
                raise topic_admin.AdminError(codec.ErrorCode.invalid_request, "Duplicate resource.")
            topic_admin.alter_resource(
                ctx.broker,
                resource_type,
                name,
                replace=[(c.name, c.value) for c in resource.configs],
                validate_only=validate_only,
            )
        except Exception as exc:  # noqa: BLE001 - every failure answers this resource only
            error = topic_admin.as_admin_error(exc)
            result.update(error_code=error.code, error_message=error.message)
        else:
            result.update(error_code=codec.ErrorCode.none, error_message=None)
        responses.append(result)
    return codec.build_response(request, {"responses": responses})


SPEC = HandlerSpec(ApiKey.ALTER_CONFIGS, 0, 2, handle, blocking=True)
