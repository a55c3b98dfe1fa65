"""The SASL mechanisms on their own: RFC 7677's SCRAM vector, a client written from RFC 5802 with
Python's primitives, PLAIN's and OAUTHBEARER's answers and Kafka's failure messages."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from kompakt.broker.sasl.errors import SaslFailure, SaslRefused, client_message
from kompakt.broker.sasl.jaas import parse_jaas_config
from kompakt.broker.sasl.oauthbearer import OAuthBearerServer
from kompakt.broker.sasl.plain import PlainServer
from kompakt.broker.sasl.scram import ScramCredential, ScramServer, credential_from_password
from kompakt.errors import ConfigError

NOW_MS = 1_700_000_000_000


# ---------------------------------------------------------------- SCRAM


def test_scram_sha256_rfc7677_vector() -> None:
    """RFC 7677 section 3: user "user", password "pencil", the RFC's salt and nonces."""
    credential = credential_from_password(
        "SCRAM-SHA-256", "pencil", 4096, salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    )
    server = ScramServer(
        "SCRAM-SHA-256",
        lambda user, mech: credential if user == "user" else None,
        nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    )
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


def _client_proof(
    mechanism: str, password: str, client_first_bare: str, server_first: str, without_proof: str
) -> tuple[str, bytes]:
    """RFC 5802 section 3 from Python's primitives only (the reference computation)."""
    algorithm = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        algorithm, password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.new(salted, b"Client Key", algorithm).digest()
    stored_key = hashlib.new(algorithm, client_key).digest()
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, algorithm).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server_key = hmac.new(salted, b"Server Key", algorithm).digest()
    server_signature = hmac.new(server_key, auth_message, algorithm).digest()
    return base64.b64encode(proof).decode(), server_signature


def _scram_login(mechanism: str, credential: ScramCredential | None, user: str, password: str) -> ScramServer:
    server = ScramServer(mechanism, lambda u, m: credential if (u, m) == ("alice", mechanism) else None)
    bare = f"n={user},r=clientnonce123"
    server_first = server.evaluate(f"n,,{bare}".encode()).decode()
    nonce = dict(p.split("=", 1) for p in server_first.split(","))["r"]
    without_proof = f"c=biws,r={nonce}"
    proof, expected_signature = _client_proof(mechanism, password, bare, server_first, without_proof)
    final = server.evaluate(f"{without_proof},p={proof}".encode())
    assert final == b"v=" + base64.b64encode(expected_signature)
    return server


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login_against_the_reference_computation(mechanism: str) -> None:
    credential = credential_from_password(mechanism, "alice-secret", 8192)
    server = _scram_login(mechanism, credential, "alice", "alice-secret")
    assert server.complete and server.authorization_id == "alice"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_wrong_password_fails_with_kafkas_generic_message(mechanism: str) -> None:
    credential = credential_from_password(mechanism, "alice-secret", 4096)
    with pytest.raises(SaslFailure) as failure:
        _scram_login(mechanism, credential, "alice", "wrong")
    assert not isinstance(failure.value, SaslRefused)
    assert client_message(failure.value, mechanism) == (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism "
        f"{mechanism}"
    )


def test_scram_unknown_user_is_not_told_apart_from_a_wrong_password() -> None:
    server = ScramServer("SCRAM-SHA-256", lambda u, m: None)
    with pytest.raises(SaslFailure) as failure:
        server.evaluate(b"n,,n=mallory,r=abc")
    assert not isinstance(failure.value, SaslRefused)


def test_scram_refuses_a_credential_below_kafkas_minimum_iterations() -> None:
    weak = credential_from_password("SCRAM-SHA-256", "pw", 1000)
    server = ScramServer("SCRAM-SHA-256", lambda u, m: weak)
    with pytest.raises(SaslFailure, match="Iterations 1000 is less than the minimum 4096"):
        server.evaluate(b"n,,n=alice,r=abc")


def test_scram_authorization_id_must_be_the_user() -> None:
    credential = credential_from_password("SCRAM-SHA-256", "pw", 4096)
    server = ScramServer("SCRAM-SHA-256", lambda u, m: credential)
    with pytest.raises(SaslRefused, match="different from username"):
        server.evaluate(b"n,a=bob,n=alice,r=abc")


def test_scram_escaped_user_names() -> None:
    credential = credential_from_password("SCRAM-SHA-256", "pw", 4096)
    seen: list[str] = []

    def lookup(user: str, mechanism: str) -> ScramCredential:
        seen.append(user)
        return credential

    ScramServer("SCRAM-SHA-256", lookup).evaluate(b"n,,n=a=2Cb=3Dc,r=abc")
    assert seen == ["a,b=c"]


def test_scram_delegation_token_logins_are_refused() -> None:
    credential = credential_from_password("SCRAM-SHA-256", "pw", 4096)
    server = ScramServer("SCRAM-SHA-256", lambda u, m: credential)
    with pytest.raises(SaslFailure, match="Token Authentication failed: Invalid tokenId : alice"):
        server.evaluate(b"n,,n=alice,r=abc,tokenauth=true")


def test_scram_nonce_mismatch_fails() -> None:
    credential = credential_from_password("SCRAM-SHA-256", "pw", 4096)
    server = ScramServer("SCRAM-SHA-256", lambda u, m: credential)
    server.evaluate(b"n,,n=alice,r=abc")
    with pytest.raises(SaslFailure, match="Invalid client nonce"):
        server.evaluate(b"c=biws,r=other,p=AAAA")


# ---------------------------------------------------------------- PLAIN


def test_plain_accepts_the_jaas_users() -> None:
    server = PlainServer({"alice": "alice-secret"})
    assert server.evaluate(b"\0alice\0alice-secret") == b""
    assert server.complete and server.authorization_id == "alice"


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
        (b"\0mallory\0alice-secret", "Authentication failed: Invalid username or password"),
        (b"\0\0pw", "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (
            b"bob\0alice\0alice-secret",
            "Authentication failed: Client requested an authorization id that is different from username",
        ),
    ],
)
def test_plain_refusals_carry_kafkas_messages(token: bytes, message: str) -> None:
    with pytest.raises(SaslRefused) as refused:
        PlainServer({"alice": "alice-secret"}).evaluate(token)
    assert client_message(refused.value, "PLAIN") == message


def test_plain_malformed_token_gets_the_generic_message() -> None:
    with pytest.raises(SaslFailure) as failure:
        PlainServer({}).evaluate(b"just-one-token")
    assert client_message(failure.value, "PLAIN") == (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"
    )


# ---------------------------------------------------------------- JAAS


def test_jaas_plain_login_module_users() -> None:
    module = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="admin-secret"\n'
        '  user_admin="admin-secret" // the broker itself\n'
        '  user_alice="al\\"ice;=pw" user_bob=bobpw;'
    )
    assert module.flag == "required"
    assert module.plain_users() == {"admin": "admin-secret", "alice": 'al"ice;=pw', "bob": "bobpw"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "contains 0 login modules"),
        ("a.B required; c.D required;", "contains 2 login modules"),
        ("a.B mandatory;", "Invalid control flag"),
        ('a.B required user_x="unterminated;', "unterminated quoted string"),
        ("a.B required user_x;", "expected '='"),
    ],
)
def test_jaas_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_jaas_config(text)


# ---------------------------------------------------------------- OAUTHBEARER


def _b64(value: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def unsecured_jwt(claims: dict[str, object], header: dict[str, object] | None = None) -> str:
    return f"{_b64(header or {'alg': 'none'})}.{_b64(claims)}."


def oauth_message(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


def test_oauthbearer_unsecured_jwt_names_the_principal() -> None:
    server = OAuthBearerServer({}, lambda: NOW_MS)
    token = unsecured_jwt({"sub": "alice", "iat": NOW_MS / 1000, "exp": NOW_MS / 1000 + 3600})
    assert server.evaluate(oauth_message(token)) == b""
    assert server.complete and server.authorization_id == "alice"
    assert server.expires_ms == NOW_MS + 3_600_000


@pytest.mark.parametrize(
    ("claims", "header", "options", "error"),
    [
        ({"sub": "alice", "exp": NOW_MS / 1000 - 1}, None, {}, '{"status":"invalid_token"}'),
        ({"sub": "alice"}, None, {}, '{"status":"invalid_token"}'),
        ({"exp": NOW_MS / 1000 + 60}, None, {}, '{"status":"invalid_token"}'),
        ({"sub": "alice", "exp": NOW_MS / 1000 + 60}, {"alg": "HS256"}, {}, '{"status":"invalid_token"}'),
        (
            {"sub": "alice", "exp": NOW_MS / 1000 + 60, "scope": "read"},
            None,
            {"unsecuredValidatorRequiredScope": "read write"},
            '{"status":"insufficient_scope", "scope":"read write"}',
        ),
    ],
)
def test_oauthbearer_invalid_tokens_get_the_rfc7628_error_exchange(
    claims: dict[str, object], header: dict[str, object] | None, options: dict[str, str], error: str
) -> None:
    server = OAuthBearerServer(options, lambda: NOW_MS)
    challenge = server.evaluate(oauth_message(unsecured_jwt(claims, header)))
    assert challenge.decode() == error
    assert not server.complete
    with pytest.raises(SaslRefused) as refused:
        server.evaluate(b"\x01")
    assert str(refused.value) == error


def test_oauthbearer_required_scope_present_and_clock_skew() -> None:
    token = unsecured_jwt({"sub": "alice", "exp": NOW_MS / 1000 - 1, "scope": ["read", "write"]})
    options = {"unsecuredValidatorRequiredScope": "read", "unsecuredValidatorAllowableClockSkewMs": "5000"}
    server = OAuthBearerServer(options, lambda: NOW_MS)
    assert server.evaluate(oauth_message(token)) == b""


def test_oauthbearer_malformed_first_message() -> None:
    with pytest.raises(SaslFailure, match="Invalid OAUTHBEARER client first message"):
        OAuthBearerServer({}, lambda: NOW_MS).evaluate(b"n,,auth=Bearer x")


def test_oauthbearer_authzid_must_match_the_principal() -> None:
    token = unsecured_jwt({"sub": "alice", "exp": NOW_MS / 1000 + 60})
    with pytest.raises(SaslRefused, match="different from the token's principal name"):
        OAuthBearerServer({}, lambda: NOW_MS).evaluate(oauth_message(token, "bob"))
