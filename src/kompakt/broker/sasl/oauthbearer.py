"""SASL/OAUTHBEARER (RFC 7628) with unsecured JWTs, as Kafka's default server-side validator
(``OAuthBearerUnsecuredValidatorCallbackHandler``) accepts them. For tests and development only:
an unsecured JWT has no signature, anyone can mint one for any principal.

The client's message is ``n,[a=authzid],^Aauth=Bearer <jwt>^A[key=value^A...]^A``. The token is a
JWS compact serialization with an empty signature whose header says ``"alg":"none"``; its
principal claim (``sub`` unless ``unsecuredValidatorPrincipalClaimName``) names the principal,
``exp`` must lie ahead (within ``unsecuredValidatorAllowableClockSkewMs``), ``iat`` if present
must not lie ahead, and every scope of ``unsecuredValidatorRequiredScope`` must be in the token's
scope claim.

A token that fails validation is answered as RFC 7628 says and Kafka does: the server sends a
JSON error (``{"status":"invalid_token"}``) as a challenge, the client acknowledges with a single
``0x01``, and the exchange then fails with that JSON as the message the client sees.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from kompakt.broker.sasl.errors import SaslFailure, SaslRefused

_CLIENT_FIRST = re.compile(
    r"n,(?:a=(?P<authzid>(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+))?,"
    r"\x01(?P<kvpairs>(?:[A-Za-z]+=[\x21-\x7e \t\r\n]*\x01)*)\x01",
    re.DOTALL,
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")
_INVALID_FIRST = "Invalid OAUTHBEARER client first message"


class TokenInvalid(Exception):
    """The token fails validation: ``status`` (and ``scope``) go into the JSON error."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.scope = scope


def _b64url_json(part: str, what: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        raise TokenInvalid(f"Invalid unsecured JWT {what}") from None
    if not isinstance(value, dict):
        raise TokenInvalid(f"Invalid unsecured JWT {what}: not a JSON object")
    return value


def _scope_of(claim: object) -> set[str]:
    if claim is None:
        return set()
    if isinstance(claim, str):
        return set(claim.split())
    if isinstance(claim, list) and all(isinstance(s, str) for s in claim):
        return {s for s in claim if s.strip()}
    raise TokenInvalid("The scope claim is neither a string nor a list of strings")


def _number(claims: Mapping[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenInvalid(f"Required claim missing: {name}")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenInvalid(f"The {name} claim is not a number")
    return float(value)


def validate_unsecured_jwt(token: str, options: Mapping[str, str], now_ms: int) -> str:
    """The principal name of a valid unsecured JWT; :class:`TokenInvalid` otherwise."""
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenInvalid(
            "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"
        )
    if parts[2]:
        raise TokenInvalid("Unsecured JWS compact serializations must have an empty signature")
    header = _b64url_json(parts[0], "header")
    if header.get("alg") != "none":
        raise TokenInvalid("Unsecured JWS must have 'alg' of 'none'")
    claims = _b64url_json(parts[1], "payload")
    principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub").strip() or "sub"
    principal = claims.get(principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise TokenInvalid(
            f"The principal name claim ({principal_claim}) is missing or not a non-empty string"
        )
    try:
        skew_ms = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0").strip() or 0)
    except ValueError:
        raise TokenInvalid("Invalid unsecuredValidatorAllowableClockSkewMs option") from None
    expiration = _number(claims, "exp", required=True)
    assert expiration is not None
    issued_at = _number(claims, "iat", required=False)
    if issued_at is not None and issued_at * 1000 > now_ms + skew_ms:
        raise TokenInvalid(f"The Issued At value ({issued_at * 1000:.0f} ms) lies in the future")
    if now_ms - skew_ms >= expiration * 1000:
        raise TokenInvalid(f"The indicated time ({now_ms} ms) is not before the expiration time")
    if issued_at is not None and expiration < issued_at:
        raise TokenInvalid("The Expiration Time is not after the Issued At time")
    scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope").strip() or "scope"
    scope = _scope_of(claims.get(scope_claim))
    required = options.get("unsecuredValidatorRequiredScope", "").split()
    missing = [s for s in required if s not in scope]
    if missing:
        raise TokenInvalid(f"The provided scope lacks {missing}", "insufficient_scope", " ".join(required))
    return principal


class OAuthBearerServer:
    """One OAUTHBEARER exchange with the unsecured-JWT validator."""

    mechanism = "OAUTHBEARER"

    def __init__(self, options: Mapping[str, str], now_ms: Callable[[], int]) -> None:
        self._options = options
        self._now_ms = now_ms
        self._error: str | None = None
        self.complete = False
        self.authorization_id: str | None = None
        #: When the token expires (ms since the epoch): a session must not outlive it (KIP-368).
        self.expires_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        if token == b"\x01" and self._error is not None:
            raise SaslRefused(self._error)
        self._error = None
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure(_INVALID_FIRST) from None
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise SaslFailure(_INVALID_FIRST)
        pairs = dict(pair.split("=", 1) for pair in match["kvpairs"].split("\x01") if pair)
        auth = _AUTH.fullmatch(pairs.get("auth", ""))
        if auth is None:
            raise SaslFailure(_INVALID_FIRST)
        if auth["scheme"].lower() != "bearer":
            raise SaslFailure(f"Invalid scheme in OAUTHBEARER client first message: {auth['scheme']}")
        try:
            principal = validate_unsecured_jwt(auth["token"], self._options, self._now_ms())
        except TokenInvalid as exc:
            body = f'{{"status":"{exc.status}"'
            if exc.scope is not None:
                body += f', "scope":"{exc.scope}"'
            self._error = body + "}"
            return self._error.encode()
        authzid = (match["authzid"] or "").replace("=2C", ",").replace("=3D", "=")
        if authzid and authzid != principal:
            raise SaslRefused(
                "Authentication failed: Client requested an authorization id "
                f"({authzid}) that is different from the token's principal name ({principal})"
            )
        claims = _b64url_json(auth["token"].split(".")[1], "payload")
        exp = claims.get("exp")
        self.expires_ms = int(float(exp) * 1000) if isinstance(exp, int | float) else None
        self.complete = True
        self.authorization_id = principal
        return b""
