"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ``ScramSaslServer`` runs them.

The broker never keeps a password: a :class:`ScramCredential` is the salt, the iteration count
and two keys derived from the salted password (``StoredKey`` verifies the client's proof,
``ServerKey`` signs the server's final message), exactly what Kafka's metadata log holds in a
``UserScramCredentialRecord``. A stolen credential file therefore does not let anyone log in
with SCRAM (the proof needs ``ClientKey``, which ``StoredKey`` is a one-way hash of).

The server is sans-IO: :meth:`ScramServer.evaluate` takes the client's message and returns the
server's, or raises :class:`~kompakt.broker.sasl.mechanisms.SaslFailure`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from kompakt.broker.sasl.errors import SaslFailure, SaslRefused

#: Kafka's ``ScramMechanism``: name → (hashlib name, minimum iterations).
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
SCRAM_MECHANISMS: tuple[str, ...] = tuple(_HASHES)
#: Kafka's ``ScramMechanism.minIterations`` (4096 for both) and the upper bound its
#: AlterUserScramCredentials handling accepts (``ScramControlManager``: 16384).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384

#: RFC 5802's ``saslname``: printable characters but ``,`` and ``=``, which travel as ``=2C``/``=3D``.
_SASLNAME = re.compile(r"(?:[\x01-\x7F]|[^\x00-\x7F])+")


def hash_name(mechanism: str) -> str:
    """The hashlib algorithm of ``mechanism`` (KeyError for a mechanism that is not SCRAM)."""
    return _HASHES[mechanism]


def is_scram(mechanism: str) -> bool:
    return mechanism in _HASHES


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the broker stores per user and mechanism (never the password)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(algorithm: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, algorithm).digest()


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """RFC 5802 ``Hi(Normalize(password), salt, i)``: PBKDF2 with the mechanism's HMAC.

    kompakt does not apply SASLprep (neither does Kafka's ``ScramFormatter``): the password's
    UTF-8 bytes are used as they are.
    """
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password, salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored form from a salted password (AlterUserScramCredentials sends exactly that)."""
    algorithm = hash_name(mechanism)
    client_key = _hmac(algorithm, salted, b"Client Key")
    stored_key = hashlib.new(algorithm, client_key).digest()
    server_key = _hmac(algorithm, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def credential_from_password(
    mechanism: str, password: str, iterations: int, salt: bytes | None = None
) -> ScramCredential:
    """A fresh credential (random salt unless given), as ``kafka-storage format --add-scram`` makes."""
    salt = secrets.token_bytes(32) if salt is None else salt
    salted = salted_password(mechanism, password.encode(), salt, iterations)
    return credential_from_salted(mechanism, salted, salt, iterations)


def username_from_saslname(saslname: str) -> str:
    """RFC 5802 decoding of ``=2C``/``=3D``; any other ``=`` is malformed (as in Kafka's
    ``ScramFormatter.username``)."""
    name = saslname.replace("=2C", ",").replace("=3D", "=")
    if "=" in saslname.replace("=2C", "").replace("=3D", ""):
        raise SaslFailure("Invalid username: " + saslname)
    return name


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise SaslFailure(f"Invalid SCRAM {what}") from None


@dataclass(frozen=True, slots=True)
class ClientFirst:
    """``gs2-header client-first-message-bare``: ``n,[a=authzid],n=user,r=nonce[,ext...]``."""

    authorization_id: str
    saslname: str
    nonce: str
    bare: str

    @classmethod
    def parse(cls, token: bytes) -> ClientFirst:
        text = _decode(token, "client first message")
        match = re.fullmatch(
            r"n,(?:a=(?P<authzid>[^,]+))?,(?P<bare>n=(?P<name>[^,]+),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)(?:,.*)?)",
            text,
            re.DOTALL,
        )
        if match is None:
            raise SaslFailure("Invalid SCRAM client first message format: " + _shorten(text))
        return cls(match["authzid"] or "", match["name"], match["nonce"], match["bare"])


@dataclass(frozen=True, slots=True)
class ClientFinal:
    """``c=channel-binding,r=nonce[,ext...],p=proof``; ``without_proof`` is what the signatures sign."""

    channel_binding: bytes
    nonce: str
    proof: bytes
    without_proof: str

    @classmethod
    def parse(cls, token: bytes) -> ClientFinal:
        text = _decode(token, "client final message")
        match = re.fullmatch(
            r"(?P<without>c=(?P<cbind>[A-Za-z0-9+/=]+),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)(?:,[^,]*)*?),p=(?P<proof>[A-Za-z0-9+/=]+)",
            text,
            re.DOTALL,
        )
        if match is None:
            raise SaslFailure("Invalid SCRAM client final message format: " + _shorten(text))
        return cls(
            _b64decode(match["cbind"], "channel binding"),
            match["nonce"],
            _b64decode(match["proof"], "client proof"),
            match["without"],
        )


def _decode(token: bytes, what: str) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslFailure(f"Invalid SCRAM {what}: not UTF-8") from None


def _shorten(text: str) -> str:
    return text if len(text) <= 64 else text[:64] + "..."


#: Looks a user's credential up for one mechanism; None when the user has none.
CredentialLookup = Callable[[str, str], ScramCredential | None]


class ScramServer:
    """One SCRAM exchange on the server side: client-first → server-first, client-final → server-final.

    Failures follow Kafka: an unknown user or a wrong proof is a :class:`SaslFailure` whose text is
    logged but not sent (the client sees Kafka's generic "invalid credentials" message, so the
    reply does not tell whether the user exists); an authorization id other than the user is a
    :class:`SaslRefused`, whose message the client does see.
    """

    def __init__(
        self, mechanism: str, lookup: CredentialLookup, nonce: Callable[[], str] | None = None
    ) -> None:
        self.mechanism = mechanism
        self._algorithm = hash_name(mechanism)
        self._lookup = lookup
        self._nonce = nonce or (lambda: secrets.token_urlsafe(24))
        self._state = "first"
        self._first: ClientFirst | None = None
        self._server_first = ""
        self._combined_nonce = ""
        self._credential: ScramCredential | None = None
        self.authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state == "first":
                return self._client_first(token)
            if self._state == "final":
                return self._client_final(token)
            raise SaslFailure(f"Unexpected challenge in Sasl server state {self._state.upper()}")
        except SaslFailure:
            self._state = "failed"
            self._credential = None
            raise

    def _client_first(self, token: bytes) -> bytes:
        first = ClientFirst.parse(token)
        username = username_from_saslname(first.saslname)
        if ",tokenauth=true" in first.bare.lower():
            # Kafka's delegation tokens (KIP-48) log in through SCRAM with this extension; kompakt
            # issues none, so no token id is valid (Kafka's message when the token is unknown).
            raise SaslFailure(f"Token Authentication failed: Invalid tokenId : {username}")
        credential = self._lookup(username, self.mechanism)
        if credential is None:
            raise SaslFailure("Authentication failed: Invalid user credentials")
        if first.authorization_id and first.authorization_id != username:
            raise SaslRefused(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        if credential.iterations < MIN_ITERATIONS:
            raise SaslFailure(
                f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                f"for {self.mechanism}"
            )
        self._first = first
        self._credential = credential
        self.authorization_id = username
        self._combined_nonce = first.nonce + self._nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._combined_nonce},s={salt},i={credential.iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        final = ClientFinal.parse(token)
        first, credential = self._first, self._credential
        assert first is not None and credential is not None
        if final.nonce != self._combined_nonce:
            raise SaslFailure("Invalid client nonce in the final client message.")
        auth_message = f"{first.bare},{self._server_first},{final.without_proof}".encode()
        client_signature = _hmac(self._algorithm, credential.stored_key, auth_message)
        if len(final.proof) != len(client_signature):
            raise SaslFailure("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(final.proof, client_signature, strict=True))
        computed = hashlib.new(self._algorithm, client_key).digest()
        if not hmac.compare_digest(computed, credential.stored_key):
            raise SaslFailure("Invalid client credentials")
        server_signature = _hmac(self._algorithm, credential.server_key, auth_message)
        self._state = "complete"
        self._credential = None
        return b"v=" + base64.b64encode(server_signature)
