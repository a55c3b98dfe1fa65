"""SaslAuthenticate (36), v0–2: one step of the SASL exchange a SaslHandshake started.

As Kafka's ``SaslServerAuthenticator.handleSaslToken``: the token goes to the mechanism, its
answer comes back in ``auth_bytes``. When the exchange completes the connection is authenticated
as ``User:<name>`` and, from v1, ``session_lifetime_ms`` says when the client must re-authenticate
(``connections.max.reauth.ms``, bounded by an OAUTHBEARER token's expiry; 0 for never). A failure
is SASL_AUTHENTICATION_FAILED with Kafka's message, and the connection is closed after the
response; a re-authentication that would change the principal fails the same way.

Outside an exchange: on a SASL listener (no handshake first) the connection is closed as Kafka
does (``IllegalSaslStateException``); elsewhere, or after authentication, the answer is
ILLEGAL_SASL_STATE (Kafka's ``KafkaApis.handleSaslAuthenticateRequest``).
"""

from __future__ import annotations

import logging

from kompakt.broker.context import HandlerSpec, RequestContext
from kompakt.broker.sasl.errors import SaslFailure, SaslRefused, client_message
from kompakt.broker.sasl.oauthbearer import OAuthBearerServer
from kompakt.broker.sasl.state import SaslState, state_of
from kompakt.broker.session import KafkaPrincipal
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import sasl_authenticate as m

log = logging.getLogger(__name__)


def _failed(
    ctx: RequestContext, state: SaslState, mechanism: str, error: SaslFailure
) -> m.SaslAuthenticateResponse:
    reauthenticating = state.authenticated_name is not None
    log.info(
        "failed SASL/%s %s from %s on listener %s: %s",
        mechanism,
        "re-authentication" if reauthenticating else "authentication",
        ctx.client_host,
        ctx.session.listener_name,
        error,
    )
    state.exchange = None
    ctx.session.close_after_response = True
    return m.SaslAuthenticateResponse(
        error_code=codec.ErrorCode.sasl_authentication_failed,
        error_message=client_message(error, mechanism, reauthenticating=reauthenticating),
        auth_bytes=b"",
    )


def handle(ctx: RequestContext, request: m.SaslAuthenticateRequest) -> m.SaslAuthenticateResponse:
    session = ctx.session
    state = state_of(session) if session.requires_sasl else None
    exchange = state.exchange if state is not None else None
    if state is None or exchange is None:
        if session.requires_sasl and not session.authenticated:
            log.info("closing connection from %s: SaslAuthenticate before SaslHandshake", ctx.client_host)
            session.close_after_response = True
            message = "Unexpected Kafka request of type SASL_AUTHENTICATE during SASL handshake."
        else:
            message = "SaslAuthenticate request received after successful authentication"
        return m.SaslAuthenticateResponse(
            error_code=codec.ErrorCode.illegal_sasl_state, error_message=message, auth_bytes=b""
        )
    mechanism = exchange.mechanism
    try:
        answer = exchange.evaluate(bytes(request.auth_bytes))
    except SaslFailure as exc:
        return _failed(ctx, state, mechanism, exc)
    except Exception as exc:  # noqa: BLE001 - a mechanism bug must not pass as a success
        log.exception("SASL/%s exchange failed unexpectedly", mechanism)
        return _failed(ctx, state, mechanism, SaslFailure(repr(exc)))
    if not exchange.complete:
        return m.SaslAuthenticateResponse(error_code=codec.ErrorCode.none, auth_bytes=answer)
    name = exchange.authorization_id
    assert name is not None
    if state.authenticated_name is not None and name != state.authenticated_name:
        return _failed(
            ctx,
            state,
            mechanism,
            SaslRefused(
                "Cannot change principals during re-authentication from "
                f"User:{state.authenticated_name}: User:{name}"
            ),
        )
    lifetime_ms = _session_lifetime_ms(ctx, mechanism, exchange)
    now_ms = ctx.broker.sasl_service.now_ms()
    state.exchange = None
    state.authenticated_mechanism = mechanism
    state.authenticated_name = name
    state.expires_ms = now_ms + lifetime_ms if lifetime_ms > 0 else None
    session.principal = KafkaPrincipal("User", name)
    session.authenticated = True
    return m.SaslAuthenticateResponse(
        error_code=codec.ErrorCode.none,
        auth_bytes=answer,
        session_lifetime=lifetime_ms if ctx.api_version >= 1 else 0,
    )


def _session_lifetime_ms(ctx: RequestContext, mechanism: str, exchange: object) -> int:
    """Kafka's ``ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs``: the smaller of
    ``connections.max.reauth.ms`` (when positive) and the credential's remaining lifetime."""
    service = ctx.broker.sasl_service
    max_reauth = service.listener(ctx.session.listener_name).max_reauth_ms.get(mechanism, 0)
    credential_ms = None
    if isinstance(exchange, OAuthBearerServer) and exchange.expires_ms is not None:
        credential_ms = max(0, exchange.expires_ms - service.now_ms())
    if credential_ms is None:
        return max(0, max_reauth)
    if max_reauth <= 0:
        return credential_ms
    return min(credential_ms, max_reauth)


SPEC = HandlerSpec(ApiKey.SASL_AUTHENTICATE, 0, 2, handle)
