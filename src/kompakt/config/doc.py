"""The configuration tables of the documentation site, generated from the config definitions.

``docs/hooks.py`` renders them into ``docs/configuration.md`` when the site is built, so the
document cannot drift from the code.
"""

from __future__ import annotations

from kompakt.config.defs import ConfigDef
from kompakt.config.tables import BROKER_CONFIGS, TOPIC_CONFIG_DEFS, TopicConfigDef

_BROKER_SECTION = (
    "log.cleaner.enable",
    "log.cleaner.threads",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
    "message.max.bytes",
    "num.partitions",
    "auto.create.topics.enable",
    "log.retention.check.interval.ms",
    "offsets.retention.minutes",
    "socket.request.max.bytes",
    "fetch.max.bytes",
    "transaction.max.timeout.ms",
    "transactional.id.expiration.ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.state.log.num.partitions",
    "transaction.partition.verification.enable",
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "ssl.keystore.location",
    "ssl.truststore.location",
    "ssl.client.auth",
    "ssl.principal.mapping.rules",
)


def _default(definition: ConfigDef) -> str:
    if definition.default is None:
        return "(none)"
    shown = definition.format(definition.default)
    return "(none)" if shown is None else f"`{shown}`" if shown != "" else '`""`'


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def topic_config_table() -> str:
    """Markdown table of every topic config, its broker synonyms and default."""
    rows = ["| topic config | broker synonyms | default | meaning |", "|---|---|---|---|"]
    for topic_def in TOPIC_CONFIG_DEFS:
        rows.append(_topic_row(topic_def))
    return "\n".join(rows)


def _topic_row(topic_def: TopicConfigDef) -> str:
    definition = topic_def.definition
    synonyms = ", ".join(f"`{s.name}`" for s in topic_def.synonyms) or "-"
    return f"| `{definition.name}` | {synonyms} | {_default(definition)} | {_cell(definition.doc)} |"


def broker_config_table() -> str:
    """Markdown table of the broker configs users most often set."""
    rows = ["| broker config | default | dynamic | meaning |", "|---|---|---|---|"]
    for name in _BROKER_SECTION:
        definition = BROKER_CONFIGS[name]
        dynamic = "yes" if definition.dynamic else "no"
        rows.append(f"| `{name}` | {_default(definition)} | {dynamic} | {_cell(definition.doc)} |")
    return "\n".join(rows)
