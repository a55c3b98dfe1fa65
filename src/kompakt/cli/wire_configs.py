"""The cluster-default broker config resource (``--entity-default``), over the wire.

Kafka keeps cluster-wide broker defaults under the BROKER resource with an empty name (source
``DYNAMIC_DEFAULT_BROKER_CONFIG``). librdkafka cannot address that resource (it sends a broker
resource's name as a number), so ``kafka-configs --entity-type brokers --entity-default`` speaks
IncrementalAlterConfigs and DescribeConfigs itself, over kompakt's bounds-checked connection
(:mod:`kompakt.protocol.client`), as ``wire_client`` does for OffsetDelete. Plaintext only, as
the rest of the Kafka-spelled tools.
"""

from __future__ import annotations

from dataclasses import dataclass

from kompakt.cli.output import CliError
from kompakt.cli.wire_client import Connection, _bootstrap_hosts

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
BROKER_RESOURCE = 4
SET, DELETE = 0, 1
_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}


@dataclass(frozen=True)
class DefaultConfig:
    name: str
    value: str | None
    source: str
    sensitive: bool
    synonyms: list[tuple[str, str | None, str]]
    """``(name, value, source)`` as the broker lists them."""


def _connect(bootstrap: str, timeout_s: float) -> Connection:
    failures = []
    for host, port in _bootstrap_hosts(bootstrap):
        try:
            return Connection(host, port, timeout_s)
        except CliError as exc:
            failures.append(str(exc))
    raise CliError("; ".join(failures) or f"no broker in {bootstrap!r}")


def alter_default(bootstrap: str, sets: list[tuple[str, str]], deletes: list[str], timeout_s: float) -> None:
    """Set and delete cluster-default broker configs; a refusal is a :class:`CliError`."""
    configs = [{"name": k, "config_operation": SET, "value": v} for k, v in sets]
    configs += [{"name": k, "config_operation": DELETE, "value": None} for k in deletes]
    request = {
        "resources": [{"resource_type": BROKER_RESOURCE, "resource_name": "", "configs": configs}],
        "validate_only": False,
    }
    with _connect(bootstrap, timeout_s) as conn:
        answer = conn.call(
            INCREMENTAL_ALTER_CONFIGS, conn.version(INCREMENTAL_ALTER_CONFIGS, range(0, 2)), request
        )
    for result in answer.responses:
        if result.error_code != 0:
            raise CliError(
                f"cannot alter the default config for brokers: "
                f"{result.error_message or f'error code {result.error_code}'}"
            )


def describe_default(bootstrap: str, timeout_s: float) -> list[DefaultConfig]:
    """The cluster-default broker configs that are set, by name."""
    request = {
        "resources": [{"resource_type": BROKER_RESOURCE, "resource_name": "", "configuration_keys": None}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    with _connect(bootstrap, timeout_s) as conn:
        answer = conn.call(DESCRIBE_CONFIGS, conn.version(DESCRIBE_CONFIGS, range(1, 5)), request)
    found: list[DefaultConfig] = []
    for result in answer.results:
        if result.error_code != 0:
            raise CliError(
                f"cannot describe the default config for brokers: "
                f"{result.error_message or f'error code {result.error_code}'}"
            )
        for entry in result.configs:
            found.append(
                DefaultConfig(
                    name=entry.name,
                    value=entry.value,
                    source=_SOURCES.get(entry.config_source, "UNKNOWN"),
                    sensitive=bool(entry.is_sensitive),
                    synonyms=[(s.name, s.value, _SOURCES.get(s.source, "UNKNOWN")) for s in entry.synonyms],
                )
            )
    return sorted(found, key=lambda c: c.name)
