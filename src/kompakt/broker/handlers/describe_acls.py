"""DescribeAcls (29), v1–3: the ACLs a filter selects, grouped by resource pattern.

Needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise); without an authorizer
Kafka answers SECURITY_DISABLED, and so does kompakt. A filter Kafka cannot parse (an unknown
resource or pattern type) is INVALID_REQUEST, as ``DescribeAclsRequest`` validates it.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclBinding, AclOperation, PatternType, ResourcePattern, ResourceType
from kompakt.broker.acl.wire import NO_AUTHORIZER, filter_of
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode
from kompakt.protocol.messages import describe_acls as m


def _error(code: ErrorCode, message: str | None) -> m.DescribeAclsResponse:
    return m.DescribeAclsResponse(error_code=code, error_message=message, resources=[])


def handle(ctx: RequestContext, request: m.DescribeAclsRequest) -> m.DescribeAclsResponse:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return _error(ErrorCode.security_disabled, NO_AUTHORIZER)
    if not ctx.authorized_cluster(AclOperation.DESCRIBE):
        return _error(ErrorCode.cluster_authorization_failed, None)
    selector = filter_of(
        request.resource_type_filter,
        request.resource_name_filter,
        request.pattern_type_filter,
        request.principal_filter,
        request.host_filter,
        request.operation,
        request.permission_type,
    )
    if selector.resource_type == ResourceType.UNKNOWN or selector.pattern_type == PatternType.UNKNOWN:
        return _error(ErrorCode.invalid_request, "Unknown resource or pattern type in the filter")
    if selector.operation == AclOperation.UNKNOWN:
        return _error(ErrorCode.invalid_request, "Unknown operation in the filter")
    grouped: dict[ResourcePattern, list[AclBinding]] = {}
    for binding in authorizer.describe(selector):
        grouped.setdefault(binding.pattern, []).append(binding)
    return m.DescribeAclsResponse(
        error_code=0,
        error_message=None,
        resources=[
            m.DescribeAclsResource(
                resource_type=pattern.resource_type,
                resource_name=pattern.name,
                pattern_type=pattern.pattern_type,
                acls=[
                    m.AclDescription(
                        principal=b.entry.principal,
                        host=b.entry.host,
                        operation=b.entry.operation,
                        permission_type=b.entry.permission,
                    )
                    for b in bindings
                ],
            )
            for pattern, bindings in grouped.items()
        ],
    )


SPEC = HandlerSpec(ApiKey.DESCRIBE_ACLS, 1, 3, handle)
