"""SaslHandshake (17), v0–1: the client names its SASL mechanism.

As Kafka's ``SaslServerAuthenticator.handleHandshakeRequest``: an enabled mechanism is answered
NONE with the listener's enabled list and starts an exchange for the SaslAuthenticate requests
that follow; any other is UNSUPPORTED_SASL_MECHANISM with that list, and the connection is closed
after the response. On an authenticated connection a handshake starts a re-authentication
(KIP-368), which must keep the mechanism. On a listener without SASL the answer is
ILLEGAL_SASL_STATE (Kafka's ``KafkaApis.handleSaslHandshakeRequest``).

v0 is the flow of Kafka clients before 1.0, whose tokens follow the handshake as bare
size-prefixed frames instead of SaslAuthenticate requests; kompakt's server reads only Kafka
requests, so v0 is answered UNSUPPORTED_SASL_MECHANISM with an empty list and a log line saying
why, and the connection is closed. Every client kompakt is tested with uses v1.
"""

from __future__ import annotations

import logging

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.sasl.state import state_of
from kompakt.errors import ConfigError
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import sasl_handshake as m

log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: m.SaslHandshakeRequest) -> m.SaslHandshakeResponse:
    session = ctx.session
    if not session.requires_sasl:
        return m.SaslHandshakeResponse(error_code=codec.ErrorCode.illegal_sasl_state, mechanisms=[])
    state = state_of(session)
    try:
        enabled = list(ctx.broker.sasl_service.listener(session.listener_name).mechanisms)
    except ConfigError as exc:
        log.error("refusing SASL on listener %s: %s", session.listener_name, exc)
        session.close_after_response = True
        return m.SaslHandshakeResponse(error_code=codec.ErrorCode.unsupported_sasl_mechanism, mechanisms=[])
    mechanism = request.mechanism
    if ctx.api_version == 0:
        log.warning(
            "closing connection from %s: SaslHandshake v0 (unframed SASL tokens, clients before Kafka 1.0) "
            "is not supported; use a client that sends SaslAuthenticate (SaslHandshake v1)",
            ctx.client_host,
        )
        session.close_after_response = True
        return m.SaslHandshakeResponse(error_code=codec.ErrorCode.unsupported_sasl_mechanism, mechanisms=[])
    if mechanism not in enabled:
        log.info("closing connection from %s: SASL mechanism %r is not enabled", ctx.client_host, mechanism)
        session.close_after_response = True
        return m.SaslHandshakeResponse(
            error_code=codec.ErrorCode.unsupported_sasl_mechanism, mechanisms=enabled
        )
    if state.authenticated_mechanism is not None and mechanism != state.authenticated_mechanism:
        log.info(
            "closing connection from %s: SASL mechanism '%s' requested by client is not supported for "
            "re-authentication of mechanism '%s'",
            ctx.client_host,
            mechanism,
            state.authenticated_mechanism,
        )
        session.close_after_response = True
        return m.SaslHandshakeResponse(
            error_code=codec.ErrorCode.unsupported_sasl_mechanism, mechanisms=enabled
        )
    state.mechanism = mechanism
    state.handshake_version = ctx.api_version
    state.exchange = ctx.broker.sasl_service.start(session.listener_name, mechanism)
    return m.SaslHandshakeResponse(error_code=codec.ErrorCode.none, mechanisms=enabled)


SPEC = HandlerSpec(ApiKey.SASL_HANDSHAKE, 0, 1, handle)
