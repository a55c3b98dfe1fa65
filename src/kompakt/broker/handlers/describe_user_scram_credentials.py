"""DescribeUserScramCredentials (50), v0: each user's SCRAM mechanisms and iteration counts.

As Kafka's ``ScramImage.describe``: no users (null or empty) lists every user with a credential;
a named user without one is RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE, each with
Kafka's message. Salts and keys are never returned.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.sasl.scram import SCRAM_MECHANISMS
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import describe_user_scram_credentials as m

_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request: "

#: Kafka's ``ScramMechanism`` type ids on the wire (0 is UNKNOWN).
MECHANISM_TYPES: dict[str, int] = {name: i + 1 for i, name in enumerate(SCRAM_MECHANISMS)}


def _result(user: str, mechanisms: dict[str, int]) -> m.DescribeUserScramCredentialsResult:
    return m.DescribeUserScramCredentialsResult(
        user=user,
        error_code=codec.ErrorCode.none,
        credential_infos=[
            m.CredentialInfo(mechanism=MECHANISM_TYPES[name], iterations=iterations)
            for name, iterations in sorted(mechanisms.items(), key=lambda item: MECHANISM_TYPES[item[0]])
        ],
    )


def handle(
    ctx: RequestContext, request: m.DescribeUserScramCredentialsRequest
) -> m.DescribeUserScramCredentialsResponse:
    if not ctx.authorized_cluster(AclOperation.DESCRIBE):
        return m.DescribeUserScramCredentialsResponse(
            error_code=codec.ErrorCode.cluster_authorization_failed, results=[]
        )
    described = ctx.broker.sasl_service.credentials.describe()
    if not request.users:
        results = [_result(user, described[user]) for user in sorted(described)]
        return m.DescribeUserScramCredentialsResponse(error_code=codec.ErrorCode.none, results=results)
    names = [user.name for user in request.users]
    results = []
    for name in dict.fromkeys(names):
        if names.count(name) > 1:
            results.append(
                m.DescribeUserScramCredentialsResult(
                    user=name,
                    error_code=codec.ErrorCode.duplicate_resource,
                    error_message=_TWICE + name,
                    credential_infos=[],
                )
            )
        elif name not in described:
            results.append(
                m.DescribeUserScramCredentialsResult(
                    user=name,
                    error_code=codec.ErrorCode.resource_not_found,
                    error_message=f"Attempt to describe a user credential that does not exist: {name}",
                    credential_infos=[],
                )
            )
        else:
            results.append(_result(name, described[name]))
    return m.DescribeUserScramCredentialsResponse(error_code=codec.ErrorCode.none, results=results)


SPEC = HandlerSpec(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, handle)
