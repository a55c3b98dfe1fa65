"""SASL end to end with real clients (issue 27): confluent-kafka, kafka-python, aiokafka and kafkajs
log in with SCRAM-SHA-512/256 and PLAIN over SASL_SSL (and SASL_PLAINTEXT), produce and consume;
a wrong password is SASL_AUTHENTICATION_FAILED; a SCRAM user made with AlterUserScramCredentials
logs in, survives a restart and is deleted; OAUTHBEARER with librdkafka's unsecured JWT; a
consumer keeps working across KIP-368 re-authentications.

One broker for the module: PLAINTEXT (for administration), SASL_SSL and SASL_PLAINTEXT listeners.
Its first SCRAM user is written into the data directory before it starts
(``kompakt storage add-scram``, Kafka's ``kafka-storage format --add-scram``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.support.cli import run_cli
from tests.support.serve import BrokerProcess, launch
from tests.support.tls import Pki, make_pki

pytestmark = pytest.mark.clients
JS_DIR = Path(__file__).resolve().parents[1] / "js"
DEADLINE_S = 30.0
REAUTH_MS = 4000

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_alice="alice-secret" user_carol="carol-secret";'
)


class SaslBroker:
    """The module's broker process and how to reach each of its listeners."""

    def __init__(self, data_dir: Path, pki: Pki) -> None:
        self.data_dir = data_dir
        self.pki = pki
        self.process: BrokerProcess | None = None

    def start(self) -> None:
        args = [
            "--admin-port", "-1",  # a SASL listener makes the admin endpoint require a token
            "--override", "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "--override", "group.initial.rebalance.delay.ms=0",
            "--override", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
            "--override", f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}",
            "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
            "--override", f"listener.name.sasl_plaintext.connections.max.reauth.ms={REAUTH_MS}",
            *self.pki.ssl_overrides("listener.name.sasl_ssl.", client_auth="none"),
        ]  # fmt: skip
        self.process = launch(self.data_dir, *args)

    def stop(self) -> None:
        assert self.process is not None
        assert self.process.stop() == 0, self.process.stderr_path.read_text()

    def bootstrap(self, listener: str) -> str:
        assert self.process is not None
        return f"127.0.0.1:{self.process.listener_ports[listener]}"

    def client_config(self, listener: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap(listener),
            "security.protocol": listener,
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }
        if listener == "SASL_SSL":
            config["ssl.ca.location"] = str(self.pki.ca_cert)
        return config


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    base = tmp_path_factory.mktemp("sasl")
    data_dir = base / "data"
    added = run_cli(
        "storage",
        "add-scram",
        "--data-dir",
        str(data_dir),
        "SCRAM-SHA-512=[name=alice,password=alice-secret]",
        "SCRAM-SHA-256=[name=alice,iterations=8192,password=alice-secret]",
    )
    assert added.code == 0, added.stderr
    assert "Added SCRAM-SHA-512 credential for user alice" in added.stdout
    broker = SaslBroker(data_dir, make_pki(base / "pki"))
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})
    futures = admin.create_topics([NewTopic(t, 1, 1) for t in ("sasl-confluent", "sasl-kafka-python",
                                                               "sasl-aiokafka", "sasl-kafkajs", "sasl-oauth",
                                                               "sasl-reauth", "sasl-plain")])  # fmt: skip
    for future in futures.values():
        future.result(DEADLINE_S)
    yield broker
    broker.stop()


def produce_and_consume(config: dict[str, Any], topic: str, count: int = 3) -> list[tuple[bytes, bytes]]:
    """Produce ``count`` records with ``config``, then read the topic from the beginning."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})
    for i in range(count):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    assert producer.flush(DEADLINE_S) == 0, f"undelivered records; errors: {errors}"
    consumer = Consumer(
        {**config, "group.id": f"g-{topic}-{time.monotonic_ns()}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        seen: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(seen) < count:
            assert time.monotonic() < deadline, f"saw {seen}; errors {errors}"
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            seen.append((message.key(), message.value()))
        return seen
    finally:
        consumer.close()


def login_error(config: dict[str, Any]) -> KafkaError:
    """The error a client reports when its login is refused (librdkafka's error callback)."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append, "retry.backoff.ms": 100})
    deadline = time.monotonic() + DEADLINE_S
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, f"no authentication error, only {errors}"
        producer.poll(0.2)
    return next(e for e in errors if e.code() == KafkaError._AUTHENTICATION)


# ---------------------------------------------------------------- confluent-kafka


@pytest.mark.parametrize(
    ("listener", "mechanism"),
    [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256")],
)
def test_confluent_kafka_logs_in_and_round_trips(
    sasl_broker: SaslBroker, listener: str, mechanism: str
) -> None:
    config = sasl_broker.client_config(listener, mechanism, "alice", "alice-secret")
    topic = "sasl-confluent" if mechanism != "PLAIN" else "sasl-plain"
    seen = produce_and_consume(config, topic)
    assert seen[-3:] == [(b"k0", b"v0"), (b"k1", b"v1"), (b"k2", b"v2")]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_wrong_password_is_sasl_authentication_failed(sasl_broker: SaslBroker, mechanism: str) -> None:
    error = login_error(sasl_broker.client_config("SASL_SSL", mechanism, "alice", "wrong"))
    expected = {
        "SCRAM-SHA-512": "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-512",
        "PLAIN": "Authentication failed: Invalid username or password",
    }[mechanism]
    assert expected in error.str()


def test_scram_user_from_the_admin_api_logs_in_survives_a_restart_and_is_deleted(
    sasl_broker: SaslBroker,
) -> None:
    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap("PLAINTEXT")})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion("bob", info, b"bob-secret")])
    futures["bob"].result(DEADLINE_S)
    described = admin.describe_user_scram_credentials(["bob"])["bob"].result(DEADLINE_S)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)
    ]
    config = sasl_broker.client_config("SASL_SSL", "SCRAM-SHA-512", "bob", "bob-secret")
    produce_and_consume(config, "sasl-confluent", 1)

    sasl_broker.stop()
    sasl_broker.start()
    config = sasl_broker.client_config("SASL_SSL", "SCRAM-SHA-512", "bob", "bob-secret")
    produce_and_consume(config, "sasl-confluent", 1)

    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap("PLAINTEXT")})
    deletion = UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)
    admin.alter_user_scram_credentials([deletion])["bob"].result(DEADLINE_S)
    assert "invalid credentials" in login_error(config).str()


def test_oauthbearer_with_librdkafkas_unsecured_jwt(sasl_broker: SaslBroker) -> None:
    config = {
        "bootstrap.servers": sasl_broker.bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": "principal=dave",
    }
    assert produce_and_consume(config, "sasl-oauth", 2) == [(b"k0", b"v0"), (b"k1", b"v1")]


def test_consumer_keeps_working_across_reauthentication(sasl_broker: SaslBroker) -> None:
    """librdkafka re-authenticates (KIP-368) before each 4 s session ends: no connection is closed
    by the broker, and records produced over several lifetimes all arrive."""
    config = sasl_broker.client_config("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", "alice-secret")
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})
    consumer = Consumer(
        {**config, "group.id": "reauth-group", "auto.offset.reset": "earliest", "error_cb": errors.append}
    )
    consumer.subscribe(["sasl-reauth"])
    seen: list[bytes] = []
    try:
        started = time.monotonic()
        sent = 0
        while time.monotonic() - started < 2.5 * REAUTH_MS / 1000:
            producer.produce("sasl-reauth", value=f"r{sent}".encode())
            producer.flush(DEADLINE_S)
            sent += 1
            message = consumer.poll(0.3)
            if message is not None and message.error() is None:
                seen.append(message.value())
        deadline = time.monotonic() + DEADLINE_S
        while len(seen) < sent:
            assert time.monotonic() < deadline, f"saw {len(seen)} of {sent}; errors {errors}"
            message = consumer.poll(0.3)
            if message is not None and message.error() is None:
                seen.append(message.value())
    finally:
        consumer.close()
    assert seen == [f"r{i}".encode() for i in range(sent)]
    assert not [e for e in errors if e.code() in (KafkaError._TRANSPORT, KafkaError._AUTHENTICATION)], errors
    assert sasl_broker.process is not None
    assert "instead of re-authenticating" not in sasl_broker.process.stderr_path.read_text()


# ---------------------------------------------------------------- kafka-python and aiokafka


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_kafka_python_over_sasl_ssl(sasl_broker: SaslBroker, mechanism: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    options = {
        "bootstrap_servers": sasl_broker.bootstrap("SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "alice",
        "sasl_plain_password": "alice-secret",
        "ssl_cafile": str(sasl_broker.pki.ca_cert),
    }
    producer = KafkaProducer(**options)
    producer.send("sasl-kafka-python", key=mechanism.encode(), value=b"from-kafka-python").get(DEADLINE_S)
    producer.close()
    consumer = KafkaConsumer(
        "sasl-kafka-python", auto_offset_reset="earliest", consumer_timeout_ms=10_000, **options
    )
    values = [(m.key, m.value) for m in consumer]
    consumer.close()
    assert (mechanism.encode(), b"from-kafka-python") in values


def test_kafka_python_wrong_password(sasl_broker: SaslBroker, caplog: pytest.LogCaptureFixture) -> None:
    """kafka-python logs the broker's SASL_AUTHENTICATION_FAILED (error 58) for each attempt and
    then gives up bootstrapping.

    Up to three clients: on a loaded machine kafka-python's TLS transport has been seen to report
    the broker's close (which follows the error response, as Kafka's does) as "socket disconnected"
    without logging the response it had received; the broker's answer is the same each time.
    """
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KafkaPythonError

    expected = (
        "[Error 58] SaslAuthenticationFailedError: SaslAuthenticationFailedError: "
        "Authentication failed during authentication due to invalid credentials with SASL mechanism "
        "SCRAM-SHA-512"
    )
    for _attempt in range(3):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaPythonError):
            KafkaProducer(
                bootstrap_servers=sasl_broker.bootstrap("SASL_SSL"),
                security_protocol="SASL_SSL",
                sasl_mechanism="SCRAM-SHA-512",
                sasl_plain_username="alice",
                sasl_plain_password="wrong",
                ssl_cafile=str(sasl_broker.pki.ca_cert),
                max_block_ms=5_000,
            )
        if expected in caplog.text:
            break
    assert expected in caplog.text


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_aiokafka_over_sasl_ssl(sasl_broker: SaslBroker, mechanism: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def scenario() -> list[tuple[bytes, bytes]]:
        options = {
            "bootstrap_servers": sasl_broker.bootstrap("SASL_SSL"),
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": mechanism,
            "sasl_plain_username": "alice",
            "sasl_plain_password": "alice-secret",
            "ssl_context": create_ssl_context(cafile=str(sasl_broker.pki.ca_cert)),
        }
        producer = AIOKafkaProducer(**options)
        await producer.start()
        try:
            await producer.send_and_wait("sasl-aiokafka", key=mechanism.encode(), value=b"from-aiokafka")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("sasl-aiokafka", auto_offset_reset="earliest", **options)
        await consumer.start()
        try:
            batch = await consumer.getmany(timeout_ms=10_000)
            return [(m.key, m.value) for records in batch.values() for m in records]
        finally:
            await consumer.stop()

    assert (mechanism.encode(), b"from-aiokafka") in asyncio.run(scenario())


# ---------------------------------------------------------------- kafkajs


def _kafkajs(*args: str) -> subprocess.CompletedProcess[str]:
    assert shutil.which("node") is not None, "Node.js is needed for the kafkajs test"
    assert (JS_DIR / "node_modules" / "kafkajs").is_dir(), "run `make test` (it installs kafkajs from npm)"
    return subprocess.run(
        ["node", str(JS_DIR / "sasl_roundtrip.js"), *args],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


@pytest.mark.parametrize("mechanism", ["scram-sha-512", "scram-sha-256"])
def test_kafkajs_over_sasl_scram(sasl_broker: SaslBroker, mechanism: str) -> None:
    topic = f"sasl-kafkajs-{mechanism}"
    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap("PLAINTEXT")})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)
    result = _kafkajs(
        sasl_broker.bootstrap("SASL_SSL"),
        topic,
        mechanism,
        "alice",
        "alice-secret",
        str(sasl_broker.pki.ca_cert),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert [(r["key"], r["value"]) for r in records] == [("a", "1"), ("b", "2")]


def test_kafkajs_wrong_password(sasl_broker: SaslBroker) -> None:
    result = _kafkajs(
        sasl_broker.bootstrap("SASL_PLAINTEXT"), "sasl-kafkajs", "scram-sha-512", "alice", "wrong"
    )
    assert result.returncode == 2, result.stdout + result.stderr
    error = json.loads(result.stdout.splitlines()[-1])
    assert error["error"] == "KafkaJSSASLAuthenticationError"
    assert error["message"].endswith(
        "Authentication failed during authentication due to invalid credentials with SASL mechanism "
        "SCRAM-SHA-512"
    )


# ---------------------------------------------------------------- kafka-configs and storage add-scram


def test_kafka_configs_manages_scram_users_as_kafkas_config_command(sasl_broker: SaslBroker) -> None:
    bootstrap = sasl_broker.bootstrap("PLAINTEXT")
    # Both mechanisms in one --add-config are two alterations of one user in one request, which a
    # KRaft controller refuses (ScramControlManager); so does kompakt. One call per mechanism works.
    both = run_cli(
        "kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "users",
        "--entity-name", "erin", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=erin-secret],"
        "SCRAM-SHA-512=[password=erin-secret]",
    )  # fmt: skip
    assert both.code == 1 and "DUPLICATE_RESOURCE: A user credential cannot be altered twice" in both.stderr
    for spec in (
        "SCRAM-SHA-256=[iterations=8192,password=erin-secret]",
        "SCRAM-SHA-512=[password=erin-secret]",
    ):
        added = run_cli("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "users",
                        "--entity-name", "erin", "--add-config", spec)  # fmt: skip
        assert added.code == 0, added.stderr
        assert added.stdout == "Completed updating config for user erin.\n"
    described = run_cli("kafka-configs", "--bootstrap-server", bootstrap, "--describe", "--user", "erin")
    assert described.stdout == (
        "SCRAM credential configs for user-principal 'erin' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096\n"
    )
    config = sasl_broker.client_config("SASL_SSL", "SCRAM-SHA-256", "erin", "erin-secret")
    produce_and_consume(config, "sasl-confluent", 1)

    deleted = run_cli("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--user", "erin",
                      "--delete-config", "SCRAM-SHA-256")  # fmt: skip
    assert deleted.stdout == "Completed updating config for user erin.\n", deleted.stderr
    described = run_cli("kafka-configs", "--bootstrap-server", bootstrap, "--describe", "--user", "erin")
    assert (
        described.stdout
        == "SCRAM credential configs for user-principal 'erin' are SCRAM-SHA-512=iterations=4096\n"
    )
    everyone = run_cli(
        "kafka-configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "users"
    )
    assert (
        "user-principal 'alice' are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"
        in everyone.stdout
    )
    too_few = run_cli("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--user", "erin",
                      "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]")  # fmt: skip
    assert (
        too_few.code == 1
        and "UNACCEPTABLE_CREDENTIAL" in too_few.stderr
        and "Too few iterations" in too_few.stderr
    )
    missing = run_cli("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--user", "nobody",
                      "--delete-config", "SCRAM-SHA-256")  # fmt: skip
    assert missing.code == 1 and "Attempt to delete a user credential that does not exist" in missing.stderr


def test_storage_add_scram_refuses_a_data_directory_in_use(sasl_broker: SaslBroker) -> None:
    refused = run_cli("storage", "add-scram", "--data-dir", str(sasl_broker.data_dir),
                      "SCRAM-SHA-256=[name=zed,password=z]")  # fmt: skip
    assert refused.code == 1
    assert "Stop the broker first" in refused.stderr


def test_kafka_configs_users_over_sasl_ssl_with_a_command_config(
    sasl_broker: SaslBroker, tmp_path: Path
) -> None:
    """Kafka's documented way to manage SCRAM users on a secured broker: --command-config with
    security.protocol, sasl.mechanism, a ScramLoginModule JAAS line and a PEM trust store."""
    properties = tmp_path / "admin.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
        'password="alice-secret";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={sasl_broker.pki.ca_cert}\n"
    )
    bootstrap = sasl_broker.bootstrap("SASL_SSL")
    added = run_cli("kafka-configs", "--bootstrap-server", bootstrap, "--command-config", str(properties),
                    "--alter", "--user", "frank",
                    "--add-config", "SCRAM-SHA-512=[password=frank-secret]")  # fmt: skip
    assert added.code == 0, added.stderr
    assert added.stdout == "Completed updating config for user frank.\n"
    described = run_cli("kafka-configs", "--bootstrap-server", bootstrap, "--command-config", str(properties),
                        "--describe", "--user", "frank")  # fmt: skip
    assert (
        described.stdout
        == "SCRAM credential configs for user-principal 'frank' are SCRAM-SHA-512=iterations=4096\n"
    )
    produce_and_consume(
        sasl_broker.client_config("SASL_SSL", "SCRAM-SHA-512", "frank", "frank-secret"), "sasl-plain", 1
    )
    topics = run_cli("kafka-configs", "--bootstrap-server", bootstrap, "--command-config", str(properties),
                     "--describe", "--entity-type", "topics")  # fmt: skip
    assert topics.code == 2 and "--entity-type users only" in topics.stderr
