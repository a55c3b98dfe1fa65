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

from kompakt.broker.client_regex import RegexSyntaxError
from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    coordinator = ctx.broker.txn
    if coordinator is None:
        return codec.build_response(
            request,
            {
                "error_code": codec.ErrorCode.coordinator_not_available,
                "unknown_state_filters": [],
                "transaction_states": [],
            },
        )
    try:
        listed, unknown = coordinator.list_transactions(
            getattr(request, "producer_id_filters", ()),
            getattr(request, "state_filters", ()),
            getattr(request, "duration_filter", -1),
            getattr(request, "transactional_id_pattern", None),
        )
    except RegexSyntaxError:
        return codec.build_response(
            request,
            {
                "error_code": codec.ErrorCode.invalid_regular_expression,
                "unknown_state_filters": [],
                "transaction_states": [],
            },
        )
    return codec.build_response(
        request,
        {
            "error_code": codec.ErrorCode.none,
            "unknown_state_filters": unknown,
            "transaction_states": [
                {
                    "transactional_id": t.transactional_id,
                    "producer_id": t.producer_id,
                    "transaction_state": t.state.state_name,
                }
                for t in listed
            ],
        },
    )


SPEC = HandlerSpec(ApiKey.LIST_TRANSACTIONS, 0, 2, handle, blocking=True)
