"""CreateAcls (30), v1–3: adds ACL bindings, durable before the answer.

Needs ALTER on the cluster (every result CLUSTER_AUTHORIZATION_FAILED otherwise); without an
authorizer every result is SECURITY_DISABLED, as in Kafka. A binding Kafka refuses (a cluster
resource not named ``kafka-cluster``, an empty name, a pattern type other than LITERAL/PREFIXED,
an ANY operation, a principal without ``:``) is INVALID_REQUEST with Kafka's message; the others
of the same request are still created. Blocking: the ACL file is written and fsynced.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation
from kompakt.broker.acl.wire import NO_AUTHORIZER, binding_of
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode
from kompakt.protocol.messages import create_acls as m


def handle(ctx: RequestContext, request: m.CreateAclsRequest) -> m.CreateAclsResponse:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return _all(request, ErrorCode.security_disabled, NO_AUTHORIZER)
    if not ctx.authorized_cluster(AclOperation.ALTER):
        return _all(request, ErrorCode.cluster_authorization_failed, None)
    bindings = [
        binding_of(
            c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host, c.operation,
            c.permission_type,
        )
        for c in request.creations
    ]  # fmt: skip
    errors = authorizer.create(bindings)
    return m.CreateAclsResponse(
        results=[
            m.AclCreationResult(
                error_code=0 if error is None else ErrorCode.invalid_request, error_message=error
            )
            for error in errors
        ]
    )


def _all(request: m.CreateAclsRequest, code: ErrorCode, message: str | None) -> m.CreateAclsResponse:
    return m.CreateAclsResponse(
        results=[m.AclCreationResult(error_code=code, error_message=message) for _ in request.creations]
    )


SPEC = HandlerSpec(ApiKey.CREATE_ACLS, 1, 3, handle, blocking=True)
