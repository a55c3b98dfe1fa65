"""ListTransactions (66), v0–2: the coordinator's transactional ids, filtered (KIP-664).

Filters: states by name (names that are no state come back in ``unknown_state_filters``),
producer ids, v1 ``duration_filter`` (only transactions running longer than it), v2
``transactional_id_pattern`` (a regular expression matched against the whole id; one that does
not compile is INVALID_REGULAR_EXPRESSION). Dead ids are never listed.

The pattern has RE2 syntax and is matched in linear time, as Kafka's RE2J
(:mod:`kompakt.broker.client_regex`), in a worker thread: listing many ids takes no time from
the other connections.
"""

from __future__ import annotations

from kompakt.broker.acl.model import AclOperation, ResourceType
from kompakt.broker.client_regex import RegexSyntaxError
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import list_transactions as m


def handle(ctx: RequestContext, request: m.ListTransactionsRequest) -> m.ListTransactionsResponse:
    coordinator = ctx.broker.txn
    if coordinator is None:
        return m.ListTransactionsResponse(
            error_code=codec.ErrorCode.coordinator_not_available, transaction_states=[]
        )
    try:
        listed, unknown = coordinator.list_transactions(
            request.producer_id_filters,
            request.state_filters,
            request.duration_filter,
            request.transactional_id_pattern,
        )
    except RegexSyntaxError:
        return m.ListTransactionsResponse(
            error_code=codec.ErrorCode.invalid_regular_expression, transaction_states=[]
        )
    return m.ListTransactionsResponse(
        error_code=codec.ErrorCode.none,
        unknown_state_filters=unknown,
        transaction_states=[
            m.TransactionState(
                transactional_id=t.transactional_id,
                producer_id=t.producer_id,
                transaction_state=t.state.state_name,
            )
            for t in listed
            # Kafka lists the transactions whose id the caller may DESCRIBE.
            if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id)
        ],
    )


SPEC = HandlerSpec(ApiKey.LIST_TRANSACTIONS, 0, 2, handle, blocking=True)
