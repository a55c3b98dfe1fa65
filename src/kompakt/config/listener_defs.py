"""Listeners and TLS as Kafka configures them (``SocketServerConfigs``, ``BrokerSecurityConfigs``
and the SSL configs of ``SslConfigs``): definitions, the listener syntax and its rules.

``listeners`` is a comma-separated list of ``NAME://host:port`` entries; each name maps to a
security protocol through ``listener.security.protocol.map`` (Kafka's default maps the four
protocol names to themselves). ``advertised.listeners`` gives clients another host/port for some
or all of them. The rules are Kafka's (``KafkaConfig``/``SocketServerConfigs``), with its wording, so
a ``server.properties`` refused by Kafka is refused here with the same sentence.

SSL configs may be set per listener with Kafka's prefix ``listener.name.<lowercase name>.``; the
resolution lives in :mod:`kompakt.config.listeners`. Only PEM key and trust stores are supported
(``ssl.keystore.type=PEM``): they are what Python's ``ssl`` module reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kompakt.config.defs import LIST, STR, ConfigDef, ConfigType, Lookup, ValidString, define
from kompakt.errors import ConfigError

PASSWORD = ConfigType.PASSWORD

#: Kafka's ``SecurityProtocol`` names.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: Kafka's default ``listener.security.protocol.map``.
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
#: The prefix of a per-listener config: ``listener.name.<lowercase listener name>.<config>``.
LISTENER_PREFIX = "listener.name."

LISTENER_BROKER_DEFS: tuple[ConfigDef, ...] = (
    define("listeners", STR, "PLAINTEXT://:9092", "Addresses to listen on, as NAME://host:port entries "
           "separated by commas (an empty host binds every interface). Listeners named in "
           "controller.listener.names are not bound: a single kompakt broker has no controller quorum.",
           dynamic=False),
    define("advertised.listeners", STR, None, "Addresses given to clients for each listener (Metadata, "
           "FindCoordinator, DescribeCluster answer with the one of the listener a request arrived on); "
           "a listener not named here advertises its listeners entry.", dynamic=False),
    define("listener.security.protocol.map", STR, DEFAULT_PROTOCOL_MAP, "Security protocol of each "
           "listener name, as NAME:PROTOCOL pairs (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).",
           dynamic=False),
    define("inter.broker.listener.name", STR, None, "Name of the listener brokers use between them; "
           "checked to be a listener, otherwise unused by a single broker.", dynamic=False),
    define("ssl.keystore.type", STR, "JKS", "Key store format. kompakt reads PEM only: set PEM (a PEM "
           "file in ssl.keystore.location, or inline ssl.keystore.certificate.chain and ssl.keystore.key).",
           dynamic=False),
    define("ssl.keystore.location", STR, None, "PEM file holding the listener's private key and its "
           "certificate chain.", dynamic=False),
    define("ssl.keystore.certificate.chain", PASSWORD, None, "The listener's certificate chain, inline "
           "PEM (with ssl.keystore.key).", dynamic=False),
    define("ssl.keystore.key", PASSWORD, None, "The listener's private key, inline PEM (with "
           "ssl.keystore.certificate.chain).", dynamic=False),
    define("ssl.keystore.password", PASSWORD, None, "Key store password; a PEM key store has none "
           "(ssl.key.password decrypts an encrypted key).", dynamic=False),
    define("ssl.key.password", PASSWORD, None, "Password of an encrypted PEM private key.",
           dynamic=False),
    define("ssl.truststore.type", STR, "JKS", "Trust store format; PEM only (ssl.truststore.location or "
           "inline ssl.truststore.certificates).", dynamic=False),
    define("ssl.truststore.location", STR, None, "PEM file of the certificates trusted to sign client "
           "certificates.", dynamic=False),
    define("ssl.truststore.certificates", PASSWORD, None, "Trusted certificates, inline PEM.",
           dynamic=False),
    define("ssl.truststore.password", PASSWORD, None, "Trust store password; a PEM trust store has none.",
           dynamic=False),
    define("ssl.client.auth", STR, "none", "Client certificates: required (mutual TLS), requested "
           "(verified when sent), none.", ValidString(("required", "requested", "none")), dynamic=False),
    define("ssl.enabled.protocols", LIST, ("TLSv1.2", "TLSv1.3"), "TLS versions accepted (TLSv1.2, "
           "TLSv1.3).", dynamic=False),
    define("ssl.protocol", STR, "TLSv1.3", "The TLS protocol of the context: TLSv1.2 or TLSv1.3 (the "
           "enabled protocols decide what is negotiated, as in Kafka).", dynamic=False),
    define("ssl.cipher.suites", LIST, (), "OpenSSL names of the TLS 1.2 cipher suites offered; empty "
           "for the defaults (TLS 1.3 suites are not configurable in Python's ssl).", dynamic=False),
    define("ssl.principal.mapping.rules", STR, "DEFAULT", "Rules mapping a client certificate's "
           "distinguished name (RFC 2253) to a principal name: DEFAULT or RULE:pattern/replacement/[LU], "
           "comma-separated, first match wins.", dynamic=False),
)  # fmt: skip

#: The configs a listener may override with ``listener.name.<name>.`` (Kafka's SSL configs and the
#: principal rules; SASL configs join them in kompakt.config.listeners' resolution by name).
SSL_CONFIG_NAMES: tuple[str, ...] = tuple(d.name for d in LISTENER_BROKER_DEFS if d.name.startswith("ssl."))

_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True, slots=True)
class EndPoint:
    """One ``NAME://host:port`` entry; ``host`` empty means every interface."""

    listener_name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


def parse_protocol_map(value: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` → ``{NAME: PROTOCOL}`` (names upper-cased, as Kafka normalises them)."""
    mapping: dict[str, str] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip(), protocol.strip()
        if not sep or not name or not protocol:
            raise ConfigError(
                f"Invalid value {value} for configuration listener.security.protocol.map: "
                f"Map entry '{item}' is improperly defined (expected NAME:PROTOCOL)"
            )
        if protocol.upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"Invalid value {value} for configuration listener.security.protocol.map: "
                f"No enum constant org.apache.kafka.common.security.auth.SecurityProtocol.{protocol} "
                f"(one of {', '.join(SECURITY_PROTOCOLS)})"
            )
        mapping[name.upper()] = protocol.upper()
    return mapping


def parse_endpoints(config_name: str, value: str, protocols: dict[str, str]) -> list[EndPoint]:
    """The entries of ``listeners`` or ``advertised.listeners``, with Kafka's checks: every entry
    parses, every name has a security protocol, and names (and, for ``listeners``, non-zero
    ports) are distinct."""
    endpoints: list[EndPoint] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        match = _ENDPOINT.match(item)
        if match is None:
            raise ConfigError(
                f"Error creating broker listeners from '{value}': Unable to parse {item} to a broker endpoint"
            )
        name = match[1].upper()
        if name not in protocols:
            raise ConfigError(
                f"Error creating broker listeners from '{value}': No security protocol defined for "
                f"listener {name} (listener.security.protocol.map maps {', '.join(protocols) or 'none'})"
            )
        port = int(match[3])
        if not 0 <= port <= 65535:
            raise ConfigError(f"Error creating broker listeners from '{value}': port {port} is out of range")
        endpoints.append(EndPoint(name, match[2], port))
    names = [e.listener_name for e in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(f"Each listener must have a different name, {config_name}: {value}")
    if config_name == "listeners":
        ports = [e.port for e in endpoints if e.port != 0]
        if len(set(ports)) != len(ports):
            raise ConfigError(f"Each listener must have a different port, listeners: {value}")
    return endpoints


def controller_listener_names(config: Lookup) -> tuple[str, ...]:
    """``controller.listener.names`` upper-cased (a KRaft combined-mode ``server.properties``)."""
    value = config.get_str("controller.listener.names") or ""
    return tuple(name.strip().upper() for name in value.split(",") if name.strip())


def effective_protocol_map(config: Lookup) -> dict[str, str]:
    """``listener.security.protocol.map``; when it is not set, the listeners named in
    ``controller.listener.names`` map to PLAINTEXT too (Kafka's
    ``effectiveListenerSecurityProtocolMap``), so a KRaft combined-mode file reads as in Kafka."""
    protocols = parse_protocol_map(config.get_str("listener.security.protocol.map") or "")
    if config.lookup_set("listener.security.protocol.map") is None:
        for name in controller_listener_names(config):
            protocols.setdefault(name, "PLAINTEXT")
    return protocols


def check_listener_rules(config: Lookup) -> None:
    """Kafka's listener rules: parsable entries, known protocols, distinct names and ports,
    advertised names among the listeners and no advertised wildcard address, an existing
    ``inter.broker.listener.name``, and PEM stores only.

    Run when a broker is about to listen (``kompakt serve``), not whenever a config is read: the
    tools that read a ``server.properties`` for its log settings do not depend on its listeners.
    """
    protocols = effective_protocol_map(config)
    listeners = parse_endpoints("listeners", config.get_str("listeners") or "", protocols)
    names = {e.listener_name for e in listeners}
    advertised_value = config.get_str("advertised.listeners")
    if advertised_value:
        for endpoint in parse_endpoints("advertised.listeners", advertised_value, protocols):
            if endpoint.listener_name not in names:
                raise ConfigError(
                    "advertised.listeners listener names must be equal to or a subset of the ones defined "
                    f"in listeners. Found {endpoint.listener_name}. The valid options based on the current "
                    f"configuration are {', '.join(sorted(names))}"
                )
            if endpoint.host in ("0.0.0.0", "::"):  # noqa: S104 - names a wildcard, binds nothing
                raise ConfigError(
                    "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                    "Use a routable IP address."
                )
    inter = config.get_str("inter.broker.listener.name")
    if inter and config.lookup_set("security.inter.broker.protocol") is not None:
        raise ConfigError(
            "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."
        )
    if inter and inter.upper() not in names:
        raise ConfigError(
            f"inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid "
            f"options based on currently configured listeners are {', '.join(sorted(names))}"
        )
    for store in ("ssl.keystore.type", "ssl.truststore.type"):
        check_store_type(store, config.get_str(store))


def check_store_type(name: str, value: str | None) -> None:
    """JKS and PKCS12 stores are refused unless unused: the message says what to use instead.

    The default (``JKS``, Kafka's) is accepted while no store location is set, so a config without
    TLS needs no ``ssl.*`` line; :mod:`kompakt.server.tls` refuses it once a store is read.
    """
    if value is not None and value.upper() not in ("PEM", "JKS", "PKCS12"):
        raise ConfigError(
            f"Invalid value {value} for configuration {name}: supported types are PEM (kompakt)"
        )
