"""The broker's listeners resolved from its config: name, security protocol, bind and advertised
address, and each listener's own view of the per-listener configs.

Kafka resolves a listener's SSL (and SASL) configs by looking up
``listener.name.<lowercase listener name>.<config>`` first and the unprefixed config second; a
SASL config may also carry the mechanism (``listener.name.<l>.<mechanism>.<config>``), which
:func:`listener_value` looks up before both when asked with ``mechanism``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kompakt.config.broker import BrokerConfig
from kompakt.config.defs import ConfigValue
from kompakt.config.listener_defs import (
    LISTENER_PREFIX,
    EndPoint,
    check_listener_rules,
    controller_listener_names,
    effective_protocol_map,
    parse_endpoints,
)


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    """One listener to bind: where, with which protocol, and what clients are told."""

    name: str
    security_protocol: str
    host: str
    port: int
    #: What Metadata/FindCoordinator/DescribeCluster give a client of this listener; an empty
    #: host or port 0 mean "the bound address" (filled in once bound).
    advertised_host: str
    advertised_port: int

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")


def listener_value(
    config: BrokerConfig, listener_name: str, name: str, *, mechanism: str | None = None
) -> ConfigValue:
    """``name`` as listener ``listener_name`` sees it: the mechanism- and listener-prefixed value,
    then the listener-prefixed one, then the broker-wide value or default."""
    prefix = f"{LISTENER_PREFIX}{listener_name.lower()}."
    candidates = [f"{prefix}{mechanism.lower()}.{name}"] if mechanism else []
    candidates.append(f"{prefix}{name}")
    for candidate in candidates:
        found = config.lookup_set(candidate)
        if found is not None:
            return found[0]
    return config.get(name)


def listener_str(config: BrokerConfig, listener_name: str, name: str) -> str | None:
    value = listener_value(config, listener_name, name)
    return None if value is None else str(value)


def listener_list(config: BrokerConfig, listener_name: str, name: str) -> tuple[str, ...]:
    value = listener_value(config, listener_name, name)
    return value if isinstance(value, tuple) else ()


def broker_listeners(config: BrokerConfig) -> list[ListenerConfig]:
    """The listeners to bind, in ``listeners`` order, with their advertised addresses, after
    Kafka's listener rules (a :class:`~kompakt.errors.ConfigError` otherwise). Listeners named in
    ``controller.listener.names`` are left out: a single broker runs no controller quorum."""
    check_listener_rules(config)
    protocols = effective_protocol_map(config)
    endpoints = parse_endpoints("listeners", config.get_str("listeners") or "", protocols)
    advertised: dict[str, EndPoint] = {}
    advertised_value = config.get_str("advertised.listeners")
    if advertised_value:
        advertised = {
            e.listener_name: e for e in parse_endpoints("advertised.listeners", advertised_value, protocols)
        }
    controllers = controller_listener_names(config)
    result = []
    for endpoint in endpoints:
        if endpoint.listener_name in controllers:
            continue
        shown = advertised.get(endpoint.listener_name)
        result.append(
            ListenerConfig(
                name=endpoint.listener_name,
                security_protocol=protocols[endpoint.listener_name],
                host=endpoint.host,
                port=endpoint.port,
                advertised_host=shown.host if shown is not None else "",
                advertised_port=shown.port if shown is not None else 0,
            )
        )
    return result
