"""How a SASL exchange fails, split as Kafka splits it.

Kafka's servers throw ``SaslException`` for failures whose details must not reach an
unauthenticated client (they could tell whether a user exists): the client gets one generic
message, ``Authentication failed during authentication due to invalid credentials with SASL
mechanism <m>``, and the details go to the broker's log. ``SaslAuthenticationException`` carries a
message meant for the client (PLAIN's "Invalid username or password"). :class:`SaslFailure` is the
first, :class:`SaslRefused` the second.
"""

from __future__ import annotations


class SaslFailure(Exception):
    """The exchange failed; the client is told only that its credentials were invalid."""


class SaslRefused(SaslFailure):
    """The exchange failed with a message the client is shown as it is."""


def client_message(error: SaslFailure, mechanism: str, *, reauthenticating: bool = False) -> str:
    """The ``error_message`` of the SaslAuthenticate response for ``error`` (Kafka's wording)."""
    if isinstance(error, SaslRefused):
        return str(error)
    stage = "re-authentication" if reauthenticating else "authentication"
    return f"Authentication failed during {stage} due to invalid credentials with SASL mechanism {mechanism}"
