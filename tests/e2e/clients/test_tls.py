"""Real clients over TLS: kcat with a client certificate, confluent-kafka, kafka-python and aiokafka
against one `kompakt serve` with a PLAINTEXT and an SSL listener (``ssl.client.auth=required``).

Each client's Metadata names the port of the listener it connected to; a client without a
certificate, and one trusting another CA, are refused at the handshake.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.support.serve import BrokerProcess, start_broker
from tests.support.tls import Pki, make_pki

pytestmark = [pytest.mark.clients, pytest.mark.xdist_group("tls-broker")]

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("tls") / "data"
    broker = start_broker(
        data_dir,
        "--override",
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        *pki.ssl_overrides("listener.name.ssl."),
    )
    yield broker
    assert broker.stop() == 0, broker.stderr_path.read_text()


def ssl_port(broker: BrokerProcess) -> int:
    return broker.listener_ports["SSL"]


def confluent_conf(broker: BrokerProcess, pki: Pki) -> dict[str, object]:
    return {
        "bootstrap.servers": f"127.0.0.1:{ssl_port(broker)}",
        "security.protocol": "ssl",
        "ssl.ca.location": str(pki.ca_cert),
        "ssl.certificate.location": str(pki.client_cert),
        "ssl.key.location": str(pki.client_key),
    }


def test_ready_line_names_both_listeners(tls_broker: BrokerProcess) -> None:
    ports = tls_broker.listener_ports
    assert set(ports) == {"PLAINTEXT", "SSL"} and ports["PLAINTEXT"] != ports["SSL"]
    assert tls_broker.port == ports["PLAINTEXT"]


def kcat(pki: Pki, port: int, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert shutil.which("kcat") is not None, "kcat is missing: `make test` installs it with apt-get"
    return subprocess.run(
        [
            "kcat", "-b", f"127.0.0.1:{port}", "-X", "security.protocol=ssl",
            "-X", f"ssl.ca.location={pki.ca_cert}", "-X", f"ssl.certificate.location={pki.client_cert}",
            "-X", f"ssl.key.location={pki.client_key}", *args,
        ],
        input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip


def test_kcat_over_ssl_with_a_client_certificate(tls_broker: BrokerProcess, pki: Pki) -> None:
    port = ssl_port(tls_broker)
    produced = kcat(pki, port, "-P", "-t", "kcat-tls", "-K", ":", stdin="k1:v1\nk2:v2\n")
    assert produced.returncode == 0, produced.stderr
    consumed = kcat(pki, port, "-C", "-t", "kcat-tls", "-o", "beginning", "-e", "-f", "%k=%s\n")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["k1=v1", "k2=v2"]
    listing = kcat(pki, port, "-L")
    assert f"127.0.0.1:{port}" in listing.stdout  # the SSL listener's own address


def test_confluent_kafka_over_ssl(tls_broker: BrokerProcess, pki: Pki) -> None:
    from confluent_kafka import Consumer, Producer

    conf = confluent_conf(tls_broker, pki)
    producer = Producer(conf)
    for i in range(200):
        producer.produce("confluent-tls", key=f"k{i}".encode(), value=b"x" * 2000)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({**conf, "group.id": "tls-group", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["confluent-tls"])
        keys: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(keys) < 200 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                keys.append(message.key())
        assert keys == [f"k{i}".encode() for i in range(200)]
        brokers = consumer.list_topics(timeout=10).brokers
        assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", ssl_port(tls_broker))]
    finally:
        consumer.close()


def test_plaintext_client_sees_the_plaintext_listener(tls_broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": tls_broker.bootstrap})
    brokers = admin.list_topics(timeout=10).brokers
    assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", tls_broker.port)]


def test_kafka_python_over_ssl(tls_broker: BrokerProcess, pki: Pki) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    common = {
        "bootstrap_servers": f"127.0.0.1:{ssl_port(tls_broker)}",
        "security_protocol": "SSL",
        "ssl_cafile": str(pki.ca_cert),
        "ssl_certfile": str(pki.client_cert),
        "ssl_keyfile": str(pki.client_key),
    }
    producer = KafkaProducer(**common)
    for i in range(50):
        producer.send("kafka-python-tls", key=f"k{i}".encode(), value=f"v{i}".encode())
    producer.flush(TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(
        "kafka-python-tls", auto_offset_reset="earliest", consumer_timeout_ms=10_000, **common
    )
    try:
        values = [message.value for message in consumer]
    finally:
        consumer.close()
    assert values[:50] == [f"v{i}".encode() for i in range(50)]


def test_aiokafka_over_ssl(tls_broker: BrokerProcess, pki: Pki) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    bootstrap = f"127.0.0.1:{ssl_port(tls_broker)}"

    async def run() -> list[bytes | None]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context)
        await producer.start()
        try:
            for i in range(30):
                await producer.send_and_wait("aiokafka-tls", f"v{i}".encode(), key=f"k{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            "aiokafka-tls",
            bootstrap_servers=bootstrap,
            security_protocol="SSL",
            ssl_context=context,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        values: list[bytes | None] = []
        try:
            async with asyncio.timeout(TIMEOUT_S):
                while len(values) < 30:
                    batch = await consumer.getmany(timeout_ms=1000)
                    for messages in batch.values():
                        values += [m.value for m in messages]
        finally:
            await consumer.stop()
        return values

    assert asyncio.run(run()) == [f"v{i}".encode() for i in range(30)]


def _handshake(port: int, context: ssl.SSLContext) -> None:
    import socket

    with (
        socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        # TLS 1.3 reports a refused client certificate on the first read, not in the handshake.
        tls.sendall(b"\x00\x00\x00\x0c\x00\x12\x00\x00\x00\x00\x00\x01\x00\x02ab")
        if not tls.recv(4):
            raise ssl.SSLError("closed by the broker")


def test_client_without_certificate_is_refused(tls_broker: BrokerProcess, pki: Pki) -> None:
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _handshake(ssl_port(tls_broker), context)
    with_cert = ssl.create_default_context(cafile=str(pki.ca_cert))
    with_cert.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    _handshake(ssl_port(tls_broker), with_cert)  # the same request with a certificate is answered


def test_client_trusting_another_ca_fails_the_handshake(tls_broker: BrokerProcess, pki: Pki) -> None:
    context = ssl.create_default_context(cafile=str(pki.other_ca_cert))
    context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(ssl_port(tls_broker), context)


def test_admin_endpoint_names_the_listeners(tls_broker: BrokerProcess) -> None:
    import json
    import urllib.request

    with urllib.request.urlopen(f"{tls_broker.admin_url}/v1/listeners", timeout=TIMEOUT_S) as response:
        listeners = json.load(response)["listeners"]
    assert [
        (e["name"], e["security_protocol"], e["port"], e["advertised_port"], e["client_auth"])
        for e in listeners
    ] == [
        ("PLAINTEXT", "PLAINTEXT", tls_broker.port, tls_broker.port, None),
        ("SSL", "SSL", ssl_port(tls_broker), ssl_port(tls_broker), "required"),
    ]
