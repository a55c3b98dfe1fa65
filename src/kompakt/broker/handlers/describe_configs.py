"""DescribeConfigs (32), v1–4: topic, broker and group configs with sources, synonyms and
documentation.

Resource types: TOPIC (2), BROKER (4; name ``""`` lists only the dynamic cluster defaults, as
Kafka does, and otherwise must be this broker's id), BROKER_LOGGER (8; kompakt has no dynamic
loggers, so this broker answers with an empty list) and GROUP (32; Kafka 4's group configs, the
group's own values or the broker's, for any group name but ``""``, with or without members).
Anything else is INVALID_REQUEST for that resource. ``configuration_keys`` null or empty means
every key (Kafka's reading). Synonyms are sent only when asked for (v1+), documentation only when
asked for (v3+); ``config_type`` is v3+ and the response builder drops it for older versions.
"""

from __future__ import annotations

from collections.abc import Sequence

from kompakt.broker import topic_admin
from kompakt.broker.acl.checks import check_config_resource
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.topic_admin import ResourceType
from kompakt.config.describe import ConfigEntry
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import describe_configs as m


def _entry(
    entry: ConfigEntry, include_synonyms: bool, include_documentation: bool
) -> m.DescribeConfigsResourceResult:
    synonyms = (
        [m.DescribeConfigsSynonym(name=s.name, value=s.value, source=int(s.source)) for s in entry.synonyms]
        if include_synonyms
        else []
    )
    return m.DescribeConfigsResourceResult(
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        config_source=int(entry.source),
        is_sensitive=entry.sensitive,
        synonyms=synonyms,
        config_type=int(entry.type),
        documentation=entry.documentation if include_documentation else None,
    )


def _describe(
    ctx: RequestContext, resource_type: int, name: str, keys: Sequence[str] | None
) -> list[ConfigEntry]:
    broker = ctx.broker
    check_config_resource(ctx, resource_type, name, alter=False)
    if resource_type == ResourceType.TOPIC:
        return topic_admin.describe_topic(broker.logs, broker.broker_config, name, keys)
    if resource_type == ResourceType.BROKER:
        return topic_admin.describe_broker(broker.broker_config, broker.node_id, name, keys)
    if resource_type == ResourceType.GROUP:
        return topic_admin.describe_group(broker, name, keys)
    if resource_type == ResourceType.BROKER_LOGGER:
        if topic_admin.broker_target(name, broker.node_id):
            raise topic_admin.AdminError(
                codec.ErrorCode.invalid_request,
                f"Unexpected broker id, expected {broker.node_id}, but received ",
            )
        return []
    raise topic_admin.AdminError(
        codec.ErrorCode.invalid_request, f"Unsupported resource type {resource_type}."
    )


def _result(
    ctx: RequestContext, request: m.DescribeConfigsRequest, resource: m.DescribeConfigsResource
) -> m.DescribeConfigsResult:
    result = m.DescribeConfigsResult(
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        error_code=codec.ErrorCode.none,
        configs=[],
    )
    try:
        entries = _describe(
            ctx, int(resource.resource_type), resource.resource_name, resource.configuration_keys or None
        )
    except Exception as exc:  # noqa: BLE001 - every failure answers this resource only
        error = topic_admin.as_admin_error(exc)
        result.error_code, result.error_message = error.code, error.message
        return result
    result.configs = [_entry(e, request.include_synonyms, request.include_documentation) for e in entries]
    return result


def handle(ctx: RequestContext, request: m.DescribeConfigsRequest) -> m.DescribeConfigsResponse:
    return m.DescribeConfigsResponse(results=[_result(ctx, request, r) for r in request.resources])


SPEC = HandlerSpec(ApiKey.DESCRIBE_CONFIGS, 1, 4, handle, blocking=True)
