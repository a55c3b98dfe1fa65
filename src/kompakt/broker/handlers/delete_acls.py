"""DeleteAcls (31), v1–3: removes the ACLs each filter matches and lists them.

Needs ALTER on the cluster; without an authorizer every filter's result is SECURITY_DISABLED,
as in Kafka. Filters are applied in order, so an ACL two filters match is listed under the first.
Blocking: the ACL file is written and fsynced.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation
from kompakt.broker.acl.wire import NO_AUTHORIZER, filter_of
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode
from kompakt.protocol.messages import delete_acls as m


def handle(ctx: RequestContext, request: m.DeleteAclsRequest) -> m.DeleteAclsResponse:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return _all(request, ErrorCode.security_disabled, NO_AUTHORIZER)
    if not ctx.authorized_cluster(AclOperation.ALTER):
        return _all(request, ErrorCode.cluster_authorization_failed, None)
    selectors = [
        filter_of(
            f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
            f.host_filter, f.operation, f.permission_type,
        )
        for f in request.filters
    ]  # fmt: skip
    results: list[m.DeleteAclsFilterResult] = []
    for outcome in authorizer.delete(selectors):
        if isinstance(outcome, str):
            results.append(
                m.DeleteAclsFilterResult(
                    error_code=ErrorCode.invalid_request, error_message=outcome, matching_acls=[]
                )
            )
            continue
        results.append(
            m.DeleteAclsFilterResult(
                error_code=0,
                error_message=None,
                matching_acls=[
                    m.DeleteAclsMatchingAcl(
                        error_code=0,
                        error_message=None,
                        resource_type=b.pattern.resource_type,
                        resource_name=b.pattern.name,
                        pattern_type=b.pattern.pattern_type,
                        principal=b.entry.principal,
                        host=b.entry.host,
                        operation=b.entry.operation,
                        permission_type=b.entry.permission,
                    )
                    for b in outcome
                ],
            )
        )
    return m.DeleteAclsResponse(filter_results=results)


def _all(request: m.DeleteAclsRequest, code: ErrorCode, message: str | None) -> m.DeleteAclsResponse:
    return m.DeleteAclsResponse(
        filter_results=[
            m.DeleteAclsFilterResult(error_code=code, error_message=message, matching_acls=[])
            for _ in request.filters
        ]
    )


SPEC = HandlerSpec(ApiKey.DELETE_ACLS, 1, 3, handle, blocking=True)
