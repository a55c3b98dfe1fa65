"""SASL/PLAIN (RFC 4616) as Kafka's ``PlainSaslServer`` and ``PlainServerCallbackHandler`` run it.

The token is ``authzid NUL username NUL password``; the password is compared in constant time
with the ``user_<name>="<password>"`` entries of the listener's ``PlainLoginModule`` JAAS config.
PLAIN sends the password itself, so it belongs on a TLS listener (``SASL_SSL``).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from kompakt.broker.sasl.errors import SaslFailure, SaslRefused


class PlainServer:
    """One PLAIN exchange: a single client message, an empty answer on success."""

    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("Unexpected SASL/PLAIN message after authentication completed")
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        tokens = text.split("\0")
        if len(tokens) != 3:
            raise SaslFailure(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, username, password = tokens
        if not username:
            raise SaslRefused("Authentication failed: username not specified")
        if not password:
            raise SaslRefused("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compare against something even for an unknown user, so timing does not tell them apart.
        reference = (expected if expected is not None else "\0" + password).encode()
        if not hmac.compare_digest(reference, password.encode()) or expected is None:
            raise SaslRefused("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslRefused(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.complete = True
        self.authorization_id = username
        return b""
