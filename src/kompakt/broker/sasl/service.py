"""The broker's SASL configuration and the per-connection exchanges it starts.

Configs are read as Kafka reads them, per listener: ``listener.name.<l>.sasl.enabled.mechanisms``
then ``sasl.enabled.mechanisms`` (default GSSAPI, which kompakt refuses with a clear message: it
has no Kerberos); ``listener.name.<l>.<mechanism>.sasl.jaas.config`` then (kompakt's addition)
``listener.name.<l>.sasl.jaas.config`` and ``sasl.jaas.config``; and
``listener.name.<l>.<mechanism>.connections.max.reauth.ms``, ``listener.name.<l>.connections.max.reauth.ms``,
``connections.max.reauth.ms``. ``<l>`` is the listener name in lower case, the mechanism too.
``sasl.mechanism.inter.broker.protocol`` is accepted and ignored: kompakt is one broker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kompakt.broker.sasl.jaas import LoginModule, parse_jaas_config
from kompakt.broker.sasl.oauthbearer import OAuthBearerServer
from kompakt.broker.sasl.plain import PlainServer
from kompakt.broker.sasl.scram import SCRAM_MECHANISMS, ScramServer
from kompakt.broker.sasl.store import ScramCredentialStore
from kompakt.clock import Clock
from kompakt.config.broker import BrokerConfig
from kompakt.errors import ConfigError

#: The mechanisms kompakt implements, in the order it lists them.
SUPPORTED_MECHANISMS: tuple[str, ...] = ("PLAIN", *SCRAM_MECHANISMS, "OAUTHBEARER")


class SaslExchange(Protocol):
    """One mechanism's server side of one authentication (sans-IO)."""

    mechanism: str
    authorization_id: str | None

    @property
    def complete(self) -> bool: ...

    def evaluate(self, token: bytes) -> bytes: ...


@dataclass(frozen=True, slots=True)
class ListenerSasl:
    """The SASL settings of one listener."""

    mechanisms: tuple[str, ...]
    plain_users: dict[str, str]
    oauth_options: dict[str, str]
    #: mechanism → ``connections.max.reauth.ms`` (0: sessions do not expire).
    max_reauth_ms: dict[str, int]


def _lookup(config: BrokerConfig, names: list[str]) -> tuple[str, object] | None:
    for name in names:
        found = config.lookup_set(name)
        if found is not None:
            return name, found[0]
    return None


class SaslService:
    """What the SASL handlers need: settings per listener, and new exchanges."""

    def __init__(
        self, config: Callable[[], BrokerConfig], clock: Clock, credentials: ScramCredentialStore
    ) -> None:
        self._config = config
        self._clock = clock
        self.credentials = credentials
        #: Settings per listener, for the config object they were read from (a dynamic config
        #: change installs a new object, which empties the cache).
        self._cached_for: BrokerConfig | None = None
        self._cache: dict[str, ListenerSasl] = {}

    def listener(self, listener_name: str) -> ListenerSasl:
        """The settings of ``listener_name`` (a :class:`ConfigError` for GSSAPI or a bad JAAS config)."""
        config = self._config()
        if config is not self._cached_for:
            self._cache = {}
            self._cached_for = config
        cached = self._cache.get(listener_name)
        if cached is None:
            cached = self._cache[listener_name] = listener_settings(config, listener_name)
        return cached

    def start(self, listener_name: str, mechanism: str) -> SaslExchange:
        """A new exchange of ``mechanism`` (which the caller checked is enabled on the listener)."""
        settings = self.listener(listener_name)
        if mechanism == "PLAIN":
            return PlainServer(settings.plain_users)
        if mechanism in SCRAM_MECHANISMS:
            return ScramServer(mechanism, self.credentials.lookup)
        if mechanism == "OAUTHBEARER":
            return OAuthBearerServer(settings.oauth_options, self._clock.now_ms)
        raise ValueError(f"mechanism {mechanism} is not supported")

    def now_ms(self) -> int:
        return self._clock.now_ms()


def listener_settings(config: BrokerConfig, listener_name: str) -> ListenerSasl:
    prefix = f"listener.name.{listener_name.lower()}."
    found = _lookup(config, [prefix + "sasl.enabled.mechanisms", "sasl.enabled.mechanisms"])
    mechanisms = tuple(found[1]) if found is not None and isinstance(found[1], tuple) else ("GSSAPI",)
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported:
        name = found[0] if found is not None else "sasl.enabled.mechanisms"
        hint = (
            " (Kafka's default, Kerberos, which kompakt does not implement)"
            if "GSSAPI" in unsupported
            else ""
        )
        raise ConfigError(
            f"SASL mechanism {', '.join(unsupported)}{hint} in {name} is not supported on listener "
            f"{listener_name}: set it to some of {', '.join(SUPPORTED_MECHANISMS)}"
        )
    plain_users: dict[str, str] = {}
    oauth_options: dict[str, str] = {}
    max_reauth: dict[str, int] = {}
    for mechanism in mechanisms:
        mech = mechanism.lower()
        module = _jaas(
            config, [prefix + f"{mech}.sasl.jaas.config", prefix + "sasl.jaas.config", "sasl.jaas.config"]
        )
        if mechanism == "PLAIN" and module is not None:
            plain_users = module.plain_users()
        if mechanism == "OAUTHBEARER" and module is not None:
            oauth_options = dict(module.options)
        reauth = _lookup(
            config,
            [
                prefix + f"{mech}.connections.max.reauth.ms",
                prefix + "connections.max.reauth.ms",
                "connections.max.reauth.ms",
            ],
        )
        max_reauth[mechanism] = int(reauth[1]) if reauth is not None and isinstance(reauth[1], int) else 0
    return ListenerSasl(mechanisms, plain_users, oauth_options, max_reauth)


def _jaas(config: BrokerConfig, names: list[str]) -> LoginModule | None:
    found = _lookup(config, names)
    if found is None or not isinstance(found[1], str):
        return None
    return parse_jaas_config(found[1], found[0])
