"""SASL's broker configs (Kafka's ``BrokerSecurityConfigs`` and ``SaslConfigs``) that kompakt acts on.

Each may also be set per listener, and the JAAS config and the session lifetime per listener and
mechanism (``listener.name.<listener>.<mechanism>.sasl.jaas.config``), as in Kafka; the broker's
SASL service (``kompakt.broker.sasl.service``) resolves them. Defaults and types are Kafka's.
"""

from __future__ import annotations

from kompakt.config.defs import INT, LIST, LONG, STR, ConfigDef, ConfigType, Range, define

SASL_BROKER_DEFS: tuple[ConfigDef, ...] = (
    define("sasl.enabled.mechanisms", LIST, ("GSSAPI",), "SASL mechanisms a SASL_PLAINTEXT/SASL_SSL "
           "listener offers: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (unsecured JWTs). Kafka's "
           "default, GSSAPI (Kerberos), is not implemented: a SASL listener that enables it stops the "
           "broker at start-up with a message saying so."),
    define("sasl.jaas.config", ConfigType.PASSWORD, None, "JAAS login module of a mechanism, normally "
           "set per listener and mechanism (listener.name.<l>.plain.sasl.jaas.config): PLAIN's users "
           "from PlainLoginModule's user_<name>=\"<password>\" options, OAUTHBEARER's unsecured-JWT "
           "validator options from OAuthBearerLoginModule's."),
    define("connections.max.reauth.ms", LONG, 0, "Session lifetime of a SASL connection (KIP-368): "
           "clients are told it and must re-authenticate before it ends; a connection whose session "
           "ended is closed on its next request other than a re-authentication. 0: no limit.",
           Range(0), dynamic=False),
    define("sasl.server.max.receive.size", INT, 524_288, "Largest request a SASL connection may send "
           "before it has authenticated; a larger size prefix closes the connection.", Range(1),
           dynamic=False),
    define("sasl.mechanism.inter.broker.protocol", STR, "GSSAPI", "SASL mechanism between brokers: "
           "accepted and ignored by a single broker."),
)  # fmt: skip
