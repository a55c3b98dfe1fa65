"""UpdateFeatures (57), v0–2: ``kafka-features upgrade|downgrade`` of ``transaction.version``.

Kafka forwards this to its controller, which checks every update first and applies none when one
fails (``FeatureControlManager.updateFeatures``): the answer is then INVALID_UPDATE_VERSION with
"The update failed for all features since the following feature had an error: …". Only
``transaction.version`` can change here (0–2; see :mod:`kompakt.broker.txn.features` for where
the level is kept); ``metadata.version`` and ``group.version`` accept only their one level.
v0 says ``allow_downgrade`` (a safe downgrade) where v1+ say the upgrade
type; v1 adds ``validate_only``; v0–1 answer per feature on success, v2 only at the top.
ALTER on CLUSTER is required, as on Kafka.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.txn.features import (
    FIXED_LEVELS,
    SAFE_DOWNGRADE,
    TRANSACTION_VERSION,
    UPGRADE,
    check_update,
)
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import update_features as m


def _response(
    ctx: RequestContext, request: m.UpdateFeaturesRequest, error: codec.ErrorCode, message: str | None
) -> m.UpdateFeaturesResponse:
    if ctx.api_version >= 2 or error is not codec.ErrorCode.none:
        return m.UpdateFeaturesResponse(error_code=error, error_message=message, results=[])
    return m.UpdateFeaturesResponse(
        error_code=error,
        error_message=message,
        results=[
            m.UpdatableFeatureResult(feature=u.feature, error_code=error, error_message=None)
            for u in request.feature_updates
        ],
    )


def handle(ctx: RequestContext, request: m.UpdateFeaturesRequest) -> m.UpdateFeaturesResponse:
    if not ctx.authorized_cluster(AclOperation.ALTER):
        return _response(ctx, request, codec.ErrorCode.cluster_authorization_failed, None)
    txn = ctx.broker.txn
    if txn is None:
        return _response(ctx, request, codec.ErrorCode.coordinator_not_available, None)
    current = {**FIXED_LEVELS, TRANSACTION_VERSION: txn.transaction_version}
    wanted: dict[str, int] = {}
    for update in request.feature_updates:
        if ctx.api_version == 0:
            upgrade_type = SAFE_DOWNGRADE if update.allow_downgrade else UPGRADE
        else:
            upgrade_type = update.upgrade_type
        level = update.max_version_level
        failure = check_update(
            update.feature, current.get(update.feature, 0), level, upgrade_type, ctx.broker.node_id
        )
        if failure is not None:
            return _response(
                ctx,
                request,
                codec.ErrorCode.invalid_update_version,
                "The update failed for all features since the following feature had an error: "
                + failure.message,
            )
        wanted[update.feature] = level
    new_level = wanted.get(TRANSACTION_VERSION)
    if not request.validate_only and new_level is not None and new_level != txn.transaction_version:
        txn.finalize_transaction_version(new_level)
    return _response(ctx, request, codec.ErrorCode.none, None)


SPEC = HandlerSpec(ApiKey.UPDATE_FEATURES, 0, 2, handle, blocking=True)
