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
            ops = [topic_admin.ConfigOp(c.name, int(c.config_operation), c.value) for c in resource.configs]
            topic_admin.alter_resource(ctx.broker, resource_type, name, ops=ops, validate_only=validate_only)
        except Exception as exc:  # noqa: BLE001 - every failure answers this resource only
            error = topic_admin.as_admin_error(exc)
            result.update(error_code=error.code, error_message=error.message)
        else:
            result.update(error_code=codec.ErrorCode.none, error_message=None)
        responses.append(result)
    return codec.build_response(request, {"responses": responses})


SPEC = HandlerSpec(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, handle, blocking=True)
