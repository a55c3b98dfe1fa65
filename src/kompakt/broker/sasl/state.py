"""One connection's SASL progress, and which requests its state lets through.

Kafka's ``SaslServerAuthenticator`` runs before a channel reaches the request handlers: until
authentication completes only ApiVersions, SaslHandshake and SaslAuthenticate are read, anything
else closes the connection (``IllegalSaslStateException``). After a session lifetime expires
(``connections.max.reauth.ms``, or an OAUTHBEARER token's expiry; KIP-368) the broker closes the
connection on its next request unless that request starts a re-authentication (a SaslHandshake).
kompakt serves SASL as ordinary handlers and keeps that state here, per connection;
:func:`refusal` is what the server asks before dispatching each request.
"""

from __future__ import annotations

from dataclasses import dataclass

from kompakt.broker.sasl.service import SaslExchange
from kompakt.broker.session import Session
from kompakt.protocol.apis import ApiKey

#: What an unauthenticated SASL connection may send.
_BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


@dataclass(slots=True)
class SaslState:
    """The SASL progress of one connection (kept on its :class:`Session`)."""

    #: The mechanism of the SaslHandshake being served (None before any handshake).
    mechanism: str | None = None
    #: The exchange in progress, between SaslHandshake and the last SaslAuthenticate.
    exchange: SaslExchange | None = None
    #: The SaslHandshake version: v0 is the legacy flow with unframed tokens (refused).
    handshake_version: int = 1
    #: The mechanism and principal name of the last successful authentication (re-authentication
    #: must keep both, as Kafka's ``ReauthInfo`` requires).
    authenticated_mechanism: str | None = None
    authenticated_name: str | None = None
    #: When the session ends (the broker clock's ms since the epoch); None: never.
    expires_ms: int | None = None

    @property
    def reauthenticating(self) -> bool:
        return self.authenticated_name is not None and self.exchange is not None


def state_of(session: Session) -> SaslState:
    """The session's SASL state, created on first use."""
    state = session.sasl
    if not isinstance(state, SaslState):
        state = session.sasl = SaslState()
    return state


def refusal(session: Session, api_key: int, now_ms: int) -> str | None:
    """Why ``api_key`` may not be served on this connection now (it is then closed), or None."""
    if not session.requires_sasl:
        return None
    state = session.sasl if isinstance(session.sasl, SaslState) else None
    if api_key in _BEFORE_AUTHENTICATION:
        return None
    name = _api_name(api_key)
    if not session.authenticated:
        return f"Unexpected Kafka request of type {name} during SASL handshake."
    if state is not None and state.exchange is not None:
        return f"Unexpected Kafka request of type {name} during SASL re-authentication."
    if state is not None and state.expires_ms is not None and now_ms >= state.expires_ms:
        return (
            f"the SASL session of {session.principal} expired at {state.expires_ms} ms and the client sent "
            f"{name} instead of re-authenticating (connections.max.reauth.ms)"
        )
    return None


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"API key {api_key}"
