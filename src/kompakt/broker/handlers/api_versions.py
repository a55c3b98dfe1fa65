"""ApiVersions (18), v0–4: the ranges come from the handler table, never from a second list.

Requests above v4 never reach this handler: the dispatcher answers them with the v0-format
UNSUPPORTED_VERSION fallback so the client can retry at a version we know.

v3+ also carries Kafka's feature flags (:mod:`kompakt.broker.txn.features`): ``metadata.version``
27 and ``group.version`` 1 at fixed levels, and ``transaction.version``: supported 0–2, finalized
at the broker's ``transaction.version`` config (2 by default, as a Kafka 4.1 cluster formats
itself). A Kafka 4 client reads the finalized level to choose its transaction protocol: at 2 the
Java producer uses transactions version 2 (EndTxn v5, Produce v12, TxnOffsetCommit v5, an epoch
bump per transaction); at 1 or 0 the earlier one. A level of 0 is not listed, as Kafka lists only
features finalized above 0. The finalized-features epoch is the coordinator's
(``TransactionCoordinator.features_epoch``), which grows with every change. UpdateFeatures
changes the level (:mod:`kompakt.broker.handlers.update_features`).
"""

from __future__ import annotations

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.txn.features import SUPPORTED, finalized_levels
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import api_versions as m


def handle(ctx: RequestContext, request: m.ApiVersionsRequest) -> m.ApiVersionsResponse:
    txn = ctx.broker.txn
    level = txn.transaction_version if txn is not None else 0
    return m.ApiVersionsResponse(
        error_code=codec.ErrorCode.none,
        api_keys=[
            m.ApiVersion(api_key=key, min_version=r.min_version, max_version=r.max_version)
            for key, r in sorted(ctx.api_versions.items())
        ],
        supported_features=[
            m.SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, (low, high) in sorted(SUPPORTED.items())
        ],
        finalized_features_epoch=txn.features_epoch if txn is not None else -1,
        finalized_features=[
            m.FinalizedFeatureKey(name=name, min_version_level=finalized, max_version_level=finalized)
            for name, finalized in finalized_levels(level).items()
        ],
    )


SPEC = HandlerSpec(ApiKey.API_VERSIONS, 0, 4, handle)
