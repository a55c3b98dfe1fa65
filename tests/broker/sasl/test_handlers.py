"""SaslHandshake, SaslAuthenticate and the SCRAM credential APIs through the dispatcher, with a
session of a SASL_PLAINTEXT listener: what a client sees, and what the connection is left as."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kompakt.broker.context import Broker, ManualTimers
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.producer_ids import ProducerIdManager
from kompakt.broker.sasl.state import refusal
from kompakt.broker.session import ANONYMOUS, KafkaPrincipal, Session
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from tests.broker.sasl.test_mechanisms import oauth_message, unsecured_jwt
from tests.support.wire import decode, request_frame

NOW_MS = 1_700_000_000_000
PROPS = {
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
    ),
    "listener.name.sasl_plaintext.connections.max.reauth.ms": "60000",
}


def make_broker(
    data_dir: Path, clock: FakeClock, props: dict[str, str] | None = None
) -> tuple[Broker, LogManager]:
    config = BrokerConfig.from_properties(PROPS if props is None else props)
    manager = LogManager(data_dir, config, clock)
    manager.open()
    broker = Broker.create(
        clock=clock,
        log_manager=manager,
        producer_ids=ProducerIdManager(manager.data_dir),
        timers=ManualTimers(clock),
    )
    return broker, manager


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW_MS)


@pytest.fixture
def broker(tmp_path: Path, clock: FakeClock) -> Any:
    broker, manager = make_broker(tmp_path / "data", clock)
    yield broker
    manager.close()


def sasl_session() -> Session:
    return Session(listener_name="SASL_PLAINTEXT", security_protocol="SASL_PLAINTEXT", authenticated=False)


def call(broker: Broker, session: Session, api_key: int, version: int, values: dict[str, object]) -> Any:
    dispatcher = Dispatcher(broker)
    request = dispatcher.decode(request_frame(api_key, version, values))
    result = dispatcher.call(dispatcher.context(request, "127.0.0.1", session), request.body)
    return decode(result, api_key, version)


def handshake(broker: Broker, session: Session, mechanism: str, version: int = 1) -> Any:
    return call(broker, session, ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism})


def authenticate(broker: Broker, session: Session, token: bytes, version: int = 2) -> Any:
    return call(broker, session, ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token})


def scram_upsert(broker: Broker, user: str, mechanism: int, password: str, iterations: int = 8192) -> Any:
    algorithm = {1: "sha256", 2: "sha512"}[mechanism]
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac(algorithm, password.encode(), salt, iterations)
    upsertion = {
        "name": user,
        "mechanism": mechanism,
        "iterations": iterations,
        "salt": salt,
        "salted_password": salted,
    }
    return call(
        broker,
        Session(),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        {"deletions": [], "upsertions": [upsertion]},
    )


def scram_client_login(broker: Broker, session: Session, mechanism: str, user: str, password: str) -> Any:
    """A full SCRAM login as a client does it (RFC 5802 from Python's primitives)."""
    algorithm = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    assert handshake(broker, session, mechanism).error_code == E.none
    bare = f"n={user},r=fyko+d2lbbFgONRv9qkxdawL"
    first = authenticate(broker, session, f"n,,{bare}".encode())
    if first.error_code != E.none:
        return first
    server_first = first.auth_bytes.decode()
    fields = dict(p.split("=", 1) for p in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        algorithm, password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.new(salted, b"Client Key", algorithm).digest()
    stored = hashlib.new(algorithm, client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    proof = bytes(
        a ^ b for a, b in zip(client_key, hmac.new(stored, auth_message, algorithm).digest(), strict=True)
    )
    return authenticate(broker, session, f"{without_proof},p={base64.b64encode(proof).decode()}".encode())


# ---------------------------------------------------------------- handshake and PLAIN


def test_handshake_lists_the_enabled_mechanisms(broker: Broker) -> None:
    response = handshake(broker, sasl_session(), "PLAIN")
    assert response.error_code == E.none
    assert list(response.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]


def test_handshake_with_a_mechanism_not_enabled_is_refused_and_closes(broker: Broker) -> None:
    session = sasl_session()
    response = handshake(broker, session, "GSSAPI")
    assert response.error_code == E.unsupported_sasl_mechanism
    assert "PLAIN" in list(response.mechanisms)
    assert session.close_after_response


def test_handshake_v0_is_refused_with_a_clear_answer(broker: Broker) -> None:
    session = sasl_session()
    assert handshake(broker, session, "PLAIN", version=0).error_code == E.unsupported_sasl_mechanism
    assert session.close_after_response


def test_handshake_on_a_plaintext_listener_is_illegal_sasl_state(broker: Broker) -> None:
    session = Session()
    assert handshake(broker, session, "PLAIN").error_code == E.illegal_sasl_state
    assert not session.close_after_response


def test_gssapi_default_is_refused_with_a_message_naming_it(tmp_path: Path, clock: FakeClock) -> None:
    broker, manager = make_broker(tmp_path / "data", clock, {})
    try:
        with pytest.raises(Exception, match="GSSAPI.*Kerberos, which kompakt does not implement"):
            broker.sasl_service.listener("SASL_PLAINTEXT")
        session = sasl_session()
        assert handshake(broker, session, "PLAIN").error_code == E.unsupported_sasl_mechanism
        assert session.close_after_response
    finally:
        manager.close()


def test_plain_login_sets_the_principal_and_session_lifetime(broker: Broker) -> None:
    session = sasl_session()
    assert refusal(session, ApiKey.METADATA, NOW_MS) is not None
    handshake(broker, session, "PLAIN")
    response = authenticate(broker, session, b"\0alice\0alice-secret")
    assert response.error_code == E.none
    assert response.session_lifetime.total_seconds() * 1000 == 60_000
    assert session.authenticated and session.principal == KafkaPrincipal("User", "alice")
    assert refusal(session, ApiKey.METADATA, NOW_MS) is None


def test_plain_wrong_password_is_sasl_authentication_failed_and_closes(broker: Broker) -> None:
    session = sasl_session()
    handshake(broker, session, "PLAIN")
    response = authenticate(broker, session, b"\0alice\0wrong")
    assert response.error_code == E.sasl_authentication_failed
    assert response.error_message == "Authentication failed: Invalid username or password"
    assert session.close_after_response and not session.authenticated and session.principal == ANONYMOUS


def test_authenticate_before_handshake_closes(broker: Broker) -> None:
    session = sasl_session()
    assert authenticate(broker, session, b"\0alice\0alice-secret").error_code == E.illegal_sasl_state
    assert session.close_after_response and not session.authenticated


def test_session_expiry_then_reauthentication(broker: Broker, clock: FakeClock) -> None:
    session = sasl_session()
    handshake(broker, session, "PLAIN")
    authenticate(broker, session, b"\0alice\0alice-secret")
    clock.advance(60_000)
    assert "expired" in (refusal(session, ApiKey.FETCH, clock.now_ms()) or "")
    assert refusal(session, ApiKey.SASL_HANDSHAKE, clock.now_ms()) is None
    assert handshake(broker, session, "PLAIN").error_code == E.none
    assert refusal(session, ApiKey.FETCH, clock.now_ms()) is not None  # mid re-authentication
    assert authenticate(broker, session, b"\0alice\0alice-secret").error_code == E.none
    assert refusal(session, ApiKey.FETCH, clock.now_ms()) is None


def test_reauthentication_cannot_change_the_principal(tmp_path: Path, clock: FakeClock) -> None:
    props = dict(PROPS)
    props["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a" user_bob="b";'
    )
    broker, manager = make_broker(tmp_path / "data", clock, props)
    try:
        session = sasl_session()
        handshake(broker, session, "PLAIN")
        authenticate(broker, session, b"\0alice\0a")
        handshake(broker, session, "PLAIN")
        response = authenticate(broker, session, b"\0bob\0b")
        assert response.error_code == E.sasl_authentication_failed
        assert (
            response.error_message
            == "Cannot change principals during re-authentication from User:alice: User:bob"
        )
        assert session.close_after_response and session.principal == KafkaPrincipal("User", "alice")
    finally:
        manager.close()


def test_oauthbearer_session_lifetime_is_bounded_by_the_token(broker: Broker) -> None:
    session = sasl_session()
    handshake(broker, session, "OAUTHBEARER")
    token = unsecured_jwt({"sub": "carol", "exp": NOW_MS / 1000 + 30})
    response = authenticate(broker, session, oauth_message(token))
    assert response.error_code == E.none and response.session_lifetime.total_seconds() * 1000 == 30_000
    assert session.principal == KafkaPrincipal("User", "carol")


def test_oauthbearer_expired_token_fails_after_the_error_exchange(broker: Broker) -> None:
    session = sasl_session()
    handshake(broker, session, "OAUTHBEARER")
    token = unsecured_jwt({"sub": "carol", "exp": NOW_MS / 1000 - 30})
    challenge = authenticate(broker, session, oauth_message(token))
    assert challenge.error_code == E.none and challenge.auth_bytes == b'{"status":"invalid_token"}'
    response = authenticate(broker, session, b"\x01")
    assert response.error_code == E.sasl_authentication_failed
    assert response.error_message == '{"status":"invalid_token"}'
    assert session.close_after_response


# ---------------------------------------------------------------- SCRAM credentials


@pytest.mark.parametrize(("mechanism", "code"), [("SCRAM-SHA-256", 1), ("SCRAM-SHA-512", 2)])
def test_scram_user_created_by_alter_logs_in_and_survives_a_restart(
    tmp_path: Path, clock: FakeClock, mechanism: str, code: int
) -> None:
    broker, manager = make_broker(tmp_path / "data", clock)
    result = scram_upsert(broker, "alice", code, "alice-secret").results
    assert [(r.user, r.error_code) for r in result] == [("alice", E.none)]
    manager.close()
    stored = (tmp_path / "data" / "kompakt-scram-credentials.json").read_text()
    assert "alice-secret" not in stored and '"iterations": 8192' in stored

    broker, manager = make_broker(tmp_path / "data", clock)
    try:
        session = sasl_session()
        response = scram_client_login(broker, session, mechanism, "alice", "alice-secret")
        assert response.error_code == E.none and response.auth_bytes.startswith(b"v=")
        assert session.principal == KafkaPrincipal("User", "alice")
        wrong = scram_client_login(broker, sasl_session(), mechanism, "alice", "nope")
        assert wrong.error_code == E.sasl_authentication_failed
        assert wrong.error_message == (
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            f"{mechanism}"
        )
        described = call(broker, Session(), ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
        assert [
            (r.user, [(c.mechanism, c.iterations) for c in r.credential_infos]) for r in described.results
        ] == [("alice", [(code, 8192)])]
        deleted = call(
            broker,
            Session(),
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            0,
            {"deletions": [{"name": "alice", "mechanism": code}], "upsertions": []},
        )
        assert [(r.user, r.error_code) for r in deleted.results] == [("alice", E.none)]
        gone = scram_client_login(broker, sasl_session(), mechanism, "alice", "alice-secret")
        assert gone.error_code == E.sasl_authentication_failed
    finally:
        manager.close()


def test_alter_scram_errors_as_kafka(broker: Broker) -> None:
    def upsertion(name: str, mechanism: int = 1, iterations: int = 4096) -> dict[str, object]:
        return {
            "name": name,
            "mechanism": mechanism,
            "iterations": iterations,
            "salt": b"s",
            "salted_password": b"p" * 32,
        }

    response = call(
        broker,
        Session(),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        {
            "deletions": [{"name": "nobody", "mechanism": 1}, {"name": "twice", "mechanism": 1}],
            "upsertions": [
                upsertion("few", iterations=4095),
                upsertion("many", iterations=16385),
                upsertion("bad-mech", mechanism=7),
                upsertion(""),
                upsertion("twice"),
                upsertion("ok"),
            ],
        },
    )
    results = {r.user: (r.error_code, r.error_message) for r in response.results}
    assert results == {
        "nobody": (E.resource_not_found, "Attempt to delete a user credential that does not exist"),
        "twice": (E.resource_not_found, "Attempt to delete a user credential that does not exist"),
        "few": (E.unacceptable_credential, "Too few iterations"),
        "many": (E.unacceptable_credential, "Too many iterations"),
        "bad-mech": (E.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        "": (E.unacceptable_credential, "Username must not be empty"),
        "ok": (E.none, None),
    }
    twice = call(
        broker,
        Session(),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        {"deletions": [], "upsertions": [upsertion("dup"), upsertion("dup", mechanism=2)]},
    )
    assert [(r.user, r.error_code) for r in twice.results] == [("dup", E.duplicate_resource)]


def test_describe_scram_errors_as_kafka(broker: Broker) -> None:
    scram_upsert(broker, "alice", 2, "pw")
    response = call(
        broker,
        Session(),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        0,
        {"users": [{"name": "alice"}, {"name": "ghost"}, {"name": "dup"}, {"name": "dup"}]},
    )
    assert [(r.user, r.error_code) for r in response.results] == [
        ("alice", E.none),
        ("ghost", E.resource_not_found),
        ("dup", E.duplicate_resource),
    ]
    assert (
        response.results[1].error_message
        == "Attempt to describe a user credential that does not exist: ghost"
    )


def test_a_corrupt_credentials_file_stops_the_broker_and_is_kept(tmp_path: Path, clock: FakeClock) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "kompakt-scram-credentials.json").write_text("{not json")
    with pytest.raises(Exception, match="kompakt-scram-credentials.json is not valid JSON"):
        make_broker(data, clock)
    assert (data / "kompakt-scram-credentials.json").read_text() == "{not json"


# ---------------------------------------------------------------- malformed tokens


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]),
    tokens=st.lists(st.binary(max_size=200), min_size=1, max_size=3),
)
def test_malformed_tokens_give_an_error_never_an_exception(
    broker: Broker, mechanism: str, tokens: list[bytes]
) -> None:
    session = sasl_session()
    handshake(broker, session, mechanism)
    for token in tokens:
        response = authenticate(broker, session, token)
        assert response.error_code in (E.none, E.sasl_authentication_failed, E.illegal_sasl_state)
        if response.error_code != E.none:
            assert session.close_after_response and not session.authenticated
            break
