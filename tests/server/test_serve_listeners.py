"""``kompakt serve`` with Kafka's listener configs: invalid ones are one ``error:`` line and exit 2
before anything is created; a taken port names its listener; ``--host``/``--port`` still define
the PLAINTEXT listener when ``listeners`` is not set."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from kompakt.cli.serve import build_settings
from tests.server.test_serve_cli import run_serve


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            ["listeners=PLAINTEXT://127.0.0.1:19092,SSL://127.0.0.1:19092"],
            "error: Each listener must have a different port, listeners: "
            "PLAINTEXT://127.0.0.1:19092,SSL://127.0.0.1:19092",
        ),
        (
            ["listeners=PLAINTEXT://:19092,PLAINTEXT://:19093"],
            "error: Each listener must have a different name, listeners: PLAINTEXT://:19092,PLAINTEXT://:19093",
        ),
        (
            ["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:TLS"],
            "error: Invalid value PLAINTEXT:PLAINTEXT,EXTERNAL:TLS for configuration "
            "listener.security.protocol.map: No enum constant "
            "org.apache.kafka.common.security.auth.SecurityProtocol.TLS "
            "(one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)",
        ),
        (
            ["listeners=EXTERNAL://:19092"],
            "error: Error creating broker listeners from 'EXTERNAL://:19092': No security protocol "
            "defined for listener EXTERNAL (listener.security.protocol.map maps PLAINTEXT, SSL, "
            "SASL_PLAINTEXT, SASL_SSL)",
        ),
        (
            ["listeners=PLAINTEXT://:0,SSL://:0"],
            "error: listener SSL: no key store: set ssl.keystore.type=PEM and ssl.keystore.location "
            "(a PEM file with the private key and certificate chain), or "
            "ssl.keystore.certificate.chain and ssl.keystore.key",
        ),
        (
            ["advertised.listeners=SSL://kafka.example:9093"],
            "error: advertised.listeners listener names must be equal to or a subset of the ones "
            "defined in listeners. Found SSL. The valid options based on the current configuration "
            "are PLAINTEXT",
        ),
        (
            ["inter.broker.listener.name=INTERNAL"],
            "error: inter.broker.listener.name must be a listener name defined in advertised.listeners. "
            "The valid options based on currently configured listeners are PLAINTEXT",
        ),
    ],
)
def test_invalid_listener_configs_exit_2_with_one_line(
    tmp_path: Path, overrides: list[str], line: str
) -> None:
    data_dir = tmp_path / "d"
    args = [arg for override in overrides for arg in ("--override", override)]
    result = run_serve("--data-dir", str(data_dir), "--admin-port", "-1", *args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [line]
    assert not data_dir.exists()


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def test_taken_port_of_a_second_listener_names_it(tmp_path: Path, taken_port: int) -> None:
    data_dir = tmp_path / "d"
    result = run_serve(
        "--data-dir", str(data_dir), "--admin-port", "-1", "--override",
        f"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{taken_port}",
        "--override", "sasl.enabled.mechanisms=SCRAM-SHA-512",  # Kafka's GSSAPI default is refused
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"error: 127.0.0.1:{taken_port} is in use (listener SASL_PLAINTEXT); change its port in "
        "listeners (0 picks a free one)"
    ]
    assert not data_dir.exists()


def test_host_and_port_define_the_plaintext_listener(tmp_path: Path) -> None:
    settings = build_settings(tmp_path / "d", "127.0.0.2", 0, None, [])
    (listener,) = settings.kafka_listeners()
    assert (listener.name, listener.security_protocol, listener.host, listener.port) == (
        "PLAINTEXT",
        "PLAINTEXT",
        "127.0.0.2",
        0,
    )
    several = build_settings(
        tmp_path / "d",
        None,
        0,
        None,
        [
            "listeners=PLAINTEXT://127.0.0.1:19092,SASL_PLAINTEXT://127.0.0.1:19093",
            "controller.listener.names=CONTROLLER",
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
        ],
        admin_port=-1,  # with a SASL listener the admin endpoint would need a token
    )
    assert [(s.name, s.security_protocol, s.port) for s in several.kafka_listeners()] == [
        ("PLAINTEXT", "PLAINTEXT", 0),  # --port moves the first listener
        ("SASL_PLAINTEXT", "SASL_PLAINTEXT", 19093),
    ]


def test_controller_listeners_of_a_kraft_file_are_not_bound(tmp_path: Path) -> None:
    settings = build_settings(
        tmp_path / "d",
        None,
        None,
        None,
        ["listeners=PLAINTEXT://:9092,CONTROLLER://:9093", "controller.listener.names=CONTROLLER"],
    )
    assert [(s.name, s.host, s.port) for s in settings.kafka_listeners()] == [("PLAINTEXT", "0.0.0.0", 9092)]
