"""ListGroups (16), v0–4. v4 adds a states filter (empty = all) and reports each group's state."""

from __future__ import annotations

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey


def handle(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload:
    states: tuple[str, ...] = getattr(request, "states_filter", ())
    listings = ctx.broker.groups.list_groups(states)
    return codec.build_response(
        request,
        {
            "error_code": codec.ErrorCode.none,
            "groups": [
                {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state}
                for g in listings
            ],
        },
    )


SPEC = HandlerSpec(ApiKey.LIST_GROUPS, 0, 4, handle)
