"""Every broker config, merged from its owners' tables as Kafka's ``KafkaConfig`` merges theirs.

Each owner keeps its definitions (name, type, default, validator, documentation) and its
cross-field rules in its own module: :mod:`~kompakt.config.log_defs` (topic configs and their
``log.*`` synonyms, the cleaner), :mod:`~kompakt.config.group_defs` (the group coordinator, and the
configs of one group), :mod:`~kompakt.config.txn_defs` (transactions and producer ids) and
:mod:`~kompakt.config.server_defs` (node id, sizes),
:mod:`~kompakt.config.listener_defs` (listeners, TLS) and :mod:`~kompakt.config.authorizer_defs`
(the authorizer, super users). Every other Kafka 4.1 broker
config comes from :mod:`~kompakt.config.kafka`: accepted, described, and without effect.

The typed settings each owner runs with (``CleanerSettings``, ``GroupConfig``, ``TxnConfig``...)
take their field defaults from here (:func:`int_default` and friends), so a default is written
once, in its table.
"""

from __future__ import annotations

from kompakt.config.authorizer_defs import AUTHORIZER_BROKER_DEFS
from kompakt.config.defs import ConfigDef, ConfigValue, bool_value, int_value, list_value, str_value
from kompakt.config.group_defs import GROUP_BROKER_DEFS
from kompakt.config.kafka import config_def_of, kafka_broker_configs
from kompakt.config.listener_defs import LISTENER_BROKER_DEFS
from kompakt.config.log_defs import (
    DYNAMIC_CLEANER_KEYS,
    LOG_BROKER_DEFS,
    LOG_SYNONYM_BROKER_DEFS,
    TOPIC_CONFIG_DEFS,
    TOPIC_CONFIGS,
    TOPIC_NAME_OF_BROKER_SYNONYM,
    TopicConfigDef,
)
from kompakt.config.sasl_defs import SASL_BROKER_DEFS
from kompakt.config.server_defs import ADMIN_BROKER_DEFS, SERVER_BROKER_DEFS
from kompakt.config.txn_defs import TXN_BROKER_DEFS

__all__ = [
    "BROKER_CONFIGS",
    "DYNAMIC_CLEANER_KEYS",
    "INERT_BROKER_CONFIGS",
    "INTERNAL_BROKER_NAMES",
    "KOMPAKT_BROKER_CONFIGS",
    "LISTENER_ONLY_BROKER_NAMES",
    "TOPIC_CONFIGS",
    "TOPIC_CONFIG_DEFS",
    "TOPIC_NAME_OF_BROKER_SYNONYM",
    "TopicConfigDef",
    "bool_default",
    "default_of",
    "int_default",
    "list_default",
    "str_default",
]

#: The broker configs kompakt defines (and acts on), with its own wording and validators.
KOMPAKT_BROKER_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        *LOG_SYNONYM_BROKER_DEFS,
        *LOG_BROKER_DEFS,
        *TXN_BROKER_DEFS,
        *SERVER_BROKER_DEFS,
        *LISTENER_BROKER_DEFS,
        *SASL_BROKER_DEFS,
        *ADMIN_BROKER_DEFS,
        *GROUP_BROKER_DEFS,
        *AUTHORIZER_BROKER_DEFS,
    )
}

#: Every other Kafka 4.1 broker config (:mod:`kompakt.config.kafka`): accepted wherever Kafka
#: accepts it, described with its Kafka default and documentation, and otherwise without effect.
INERT_BROKER_CONFIGS: dict[str, ConfigDef] = {
    name: config_def_of(entry)
    for name, entry in kafka_broker_configs().items()
    if name not in KOMPAKT_BROKER_CONFIGS
}

#: Kafka's internal configs kompakt does not define: listed by DescribeConfigs only when set.
INTERNAL_BROKER_NAMES: frozenset[str] = frozenset(
    name for name, entry in kafka_broker_configs().items() if entry.internal and name in INERT_BROKER_CONFIGS
)

#: Kafka's SSL configs that can change at runtime only with a listener prefix.
LISTENER_ONLY_BROKER_NAMES: frozenset[str] = frozenset(
    name for name, entry in kafka_broker_configs().items() if entry.listener_only
)

BROKER_CONFIGS: dict[str, ConfigDef] = dict(
    sorted({**INERT_BROKER_CONFIGS, **KOMPAKT_BROKER_CONFIGS}.items())
)


def default_of(name: str) -> ConfigValue:
    """The built-in default of a broker config kompakt defines (a typed setting's field default)."""
    return KOMPAKT_BROKER_CONFIGS[name].default


def int_default(name: str) -> int:
    return int_value(name, default_of(name))


def bool_default(name: str) -> bool:
    return bool_value(name, default_of(name))


def str_default(name: str) -> str:
    return str_value(name, default_of(name))


def list_default(name: str) -> tuple[str, ...]:
    return list_value(name, default_of(name))
