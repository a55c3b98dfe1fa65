"""AlterUserScramCredentials (51), v0: add, replace and delete users' SCRAM credentials.

As Kafka's ``ScramControlManager.alterCredentials``: a user appears at most once per request
(DUPLICATE_RESOURCE otherwise), the name must not be empty and the mechanism must be SCRAM
(UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM), iterations lie in 4096..16384
(UNACCEPTABLE_CREDENTIAL "Too few iterations"/"Too many iterations"), a deletion needs an existing
credential (RESOURCE_NOT_FOUND). The client sends the salted password, never the password; the
broker keeps StoredKey and ServerKey derived from it. Every accepted change of the request is
written to the credentials file in one atomic replacement before the response, so an answered
change survives a crash; a write that fails answers every accepted user with the error.
"""

from __future__ import annotations

import logging

from kompakt.broker.acl.model import AclOperation
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.handlers.describe_user_scram_credentials import MECHANISM_TYPES
from kompakt.broker.sasl.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential, credential_from_salted
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import alter_user_scram_credentials as m

log = logging.getLogger(__name__)

_MECHANISM_NAMES = {code: name for name, code in MECHANISM_TYPES.items()}
_TWICE = "A user credential cannot be altered twice in the same request"


def _validate_name_and_mechanism(name: str, mechanism: int) -> tuple[int, str] | None:
    if not name:
        return codec.ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in _MECHANISM_NAMES:
        return codec.ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


def _sort(
    request: m.AlterUserScramCredentialsRequest, existing: dict[str, dict[str, int]]
) -> tuple[
    dict[str, m.ScramCredentialDeletion], dict[str, m.ScramCredentialUpsertion], dict[str, tuple[int, str]]
]:
    """The accepted deletions and upsertions by user, and the refused users with their errors."""
    deletions: dict[str, m.ScramCredentialDeletion] = {}
    upserts: dict[str, m.ScramCredentialUpsertion] = {}
    errors: dict[str, tuple[int, str]] = {}
    for deletion in request.deletions:
        if deletion.name in errors:
            continue
        if deletions.pop(deletion.name, None) is not None:
            errors[deletion.name] = (codec.ErrorCode.duplicate_resource, _TWICE)
            continue
        error = _validate_name_and_mechanism(deletion.name, deletion.mechanism)
        if error is None and _MECHANISM_NAMES[deletion.mechanism] not in existing.get(deletion.name, {}):
            error = (
                codec.ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
        if error is not None:
            errors[deletion.name] = error
        else:
            deletions[deletion.name] = deletion
    for upsertion in request.upsertions:
        if upsertion.name in errors:
            continue
        if deletions.pop(upsertion.name, None) is not None or upserts.pop(upsertion.name, None) is not None:
            errors[upsertion.name] = (codec.ErrorCode.duplicate_resource, _TWICE)
            continue
        error = _validate_name_and_mechanism(upsertion.name, upsertion.mechanism)
        if error is None and upsertion.iterations < MIN_ITERATIONS:
            error = (codec.ErrorCode.unacceptable_credential, "Too few iterations")
        elif error is None and upsertion.iterations > MAX_ITERATIONS:
            error = (codec.ErrorCode.unacceptable_credential, "Too many iterations")
        if error is not None:
            errors[upsertion.name] = error
        else:
            upserts[upsertion.name] = upsertion
    return deletions, upserts, errors


def handle(
    ctx: RequestContext, request: m.AlterUserScramCredentialsRequest
) -> m.AlterUserScramCredentialsResponse:
    store = ctx.broker.sasl_service.credentials
    if not ctx.authorized_cluster(AclOperation.ALTER):
        names = dict.fromkeys([*(d.name for d in request.deletions), *(u.name for u in request.upsertions)])
        return m.AlterUserScramCredentialsResponse(
            results=[
                m.AlterUserScramCredentialsResult(
                    user=name, error_code=codec.ErrorCode.cluster_authorization_failed
                )
                for name in names
            ]
        )
    deletions, upserts, errors = _sort(request, store.describe())
    credentials: dict[tuple[str, str], ScramCredential] = {}
    for name, upsertion in upserts.items():
        mechanism = _MECHANISM_NAMES[upsertion.mechanism]
        credentials[(name, mechanism)] = credential_from_salted(
            mechanism, bytes(upsertion.salted_password), bytes(upsertion.salt), upsertion.iterations
        )
    removed = {(name, _MECHANISM_NAMES[d.mechanism]) for name, d in deletions.items()}
    accepted = [*deletions, *upserts]
    if accepted:
        try:
            store.apply(credentials, removed)
        except OSError as exc:
            log.error("could not write SCRAM credentials: %s", exc)
            for name in accepted:
                errors[name] = (
                    codec.ErrorCode.kafka_storage_error,
                    f"Could not store the credentials: {exc}",
                )
            accepted = []
    results = [
        m.AlterUserScramCredentialsResult(user=name, error_code=codec.ErrorCode.none) for name in accepted
    ]
    results += [
        m.AlterUserScramCredentialsResult(user=name, error_code=code, error_message=message)
        for name, (code, message) in errors.items()
    ]
    return m.AlterUserScramCredentialsResponse(results=results)


SPEC = HandlerSpec(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, handle, blocking=True)
