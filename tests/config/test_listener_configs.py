"""Per-listener configs (``listener.name.<listener>.<config>``) as Kafka reads them: accepted,
validated as their base config, and resolved per listener before the broker-wide value."""

from __future__ import annotations

import pytest

from kompakt.config.broker import BrokerConfig
from kompakt.config.listeners import broker_listeners, listener_value
from kompakt.errors import ConfigError


def test_prefixed_configs_are_resolved_per_listener() -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://:9092,SSL://:9093,SASL_SSL://:9094",
            "ssl.client.auth": "requested",
            "listener.name.ssl.ssl.client.auth": "required",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": "x required;",
        }
    )
    assert listener_value(config, "SSL", "ssl.client.auth") == "required"
    assert listener_value(config, "SASL_SSL", "ssl.client.auth") == "requested"
    assert listener_value(config, "PLAINTEXT", "ssl.enabled.protocols") == ("TLSv1.2", "TLSv1.3")
    assert listener_value(config, "SASL_SSL", "sasl.jaas.config", mechanism="SCRAM-SHA-256") == "x required;"


def test_prefixed_values_are_validated_as_their_base_config() -> None:
    with pytest.raises(ConfigError, match="listener.name.ssl.ssl.client.auth"):
        BrokerConfig.from_properties({"listener.name.ssl.ssl.client.auth": "always"})
    with pytest.raises(ConfigError, match="Unknown broker config name: listener.name.ssl.ssl.bogus"):
        BrokerConfig.from_properties({"listener.name.ssl.ssl.bogus": "1"})


def test_listeners_with_advertised_addresses() -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://[::1]:9093",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
            "advertised.listeners": "EXTERNAL://kafka.example:443",
            "inter.broker.listener.name": "INTERNAL",
        }
    )
    assert [(e.name, e.security_protocol, e.host, e.port, e.advertised_host, e.advertised_port)
            for e in broker_listeners(config)] == [
        ("INTERNAL", "PLAINTEXT", "127.0.0.1", 9092, "", 0),
        ("EXTERNAL", "SASL_SSL", "::1", 9093, "kafka.example", 443),
    ]  # fmt: skip


def test_advertised_wildcard_is_refused() -> None:
    config = BrokerConfig.from_properties({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"})
    with pytest.raises(ConfigError, match="cannot use the nonroutable meta-address 0.0.0.0"):
        broker_listeners(config)


def test_inter_broker_listener_and_protocol_are_exclusive() -> None:
    config = BrokerConfig.from_properties(
        {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"}
    )
    with pytest.raises(ConfigError, match="Only one of inter.broker.listener.name and security.inter.broker"):
        broker_listeners(config)
