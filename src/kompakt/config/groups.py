"""The configs of each group that has its own (GROUP config resources, Kafka's ``GroupConfigManager``).

``kafka-configs --entity-type groups --alter`` (IncrementalAlterConfigs or AlterConfigs on a
GROUP resource) gives one group its own ``consumer.session.timeout.ms`` or
``consumer.heartbeat.interval.ms`` (and the inert ``share.*``/``streams.*`` configs); the consumer
group coordinator reads them for that group instead of the broker's ``group.consumer.*`` values.
A group needs no members or offsets to have configs, as in Kafka. :class:`GroupConfigs` is
immutable: an update builds a new one, which the broker persists
(:mod:`kompakt.config.dynamic`) and then installs, so a reader never sees half a change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from kompakt.config.defs import Lookup, int_value
from kompakt.config.group_defs import group_config_values, validate_group_config
from kompakt.errors import ConfigError

__all__ = ["GroupConfigs", "GroupResourceConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupResourceConfig:
    """The effective configs the coordinator reads for a group that has its own (Kafka's
    ``GroupConfig``): the group's value, else the broker's ``group.consumer.*`` one."""

    consumer_session_timeout_ms: int
    consumer_heartbeat_interval_ms: int

    @classmethod
    def of(cls, overrides: Mapping[str, str], broker: Lookup) -> GroupResourceConfig:
        values = group_config_values(overrides, broker)
        return cls(
            consumer_session_timeout_ms=int_value(
                "consumer.session.timeout.ms", values["consumer.session.timeout.ms"]
            ),
            consumer_heartbeat_interval_ms=int_value(
                "consumer.heartbeat.interval.ms", values["consumer.heartbeat.interval.ms"]
            ),
        )


def _frozen(overrides: Mapping[str, Mapping[str, str]]) -> Mapping[str, Mapping[str, str]]:
    return MappingProxyType({group: MappingProxyType(dict(values)) for group, values in overrides.items()})


@dataclass(frozen=True, slots=True)
class GroupConfigs:
    """Every group's own configs: ``overrides`` by group id (only groups with at least one), and
    the effective :class:`GroupResourceConfig` of each, computed once when built."""

    overrides: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: MappingProxyType({}))
    configs: Mapping[str, GroupResourceConfig] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def build(cls, overrides: Mapping[str, Mapping[str, str]], broker: Lookup) -> GroupConfigs:
        """Validate every group's configs against ``broker`` (raises :class:`ConfigError` naming
        the group) and compute their effective values."""
        configs: dict[str, GroupResourceConfig] = {}
        for group_id, values in overrides.items():
            try:
                validate_group_config(values, broker)
            except ConfigError as exc:
                raise ConfigError(f"group {group_id!r}: {exc}") from None
            configs[group_id] = GroupResourceConfig.of(values, broker)
        kept = {group: values for group, values in overrides.items() if values}
        return cls(_frozen(kept), MappingProxyType({g: configs[g] for g in kept}))

    def overrides_of(self, group_id: str) -> Mapping[str, str]:
        """The group's own configs (empty when it has none)."""
        return self.overrides.get(group_id, MappingProxyType({}))

    def config_of(self, group_id: str) -> GroupResourceConfig | None:
        """The group's effective configs, or None when it has none of its own (the coordinator
        then runs it with the broker's)."""
        return self.configs.get(group_id)

    def with_group(self, group_id: str, overrides: Mapping[str, str], broker: Lookup) -> GroupConfigs:
        """A copy in which ``group_id`` has exactly ``overrides`` (none: the group is dropped),
        validated as Kafka's ``GroupConfigManager.validate`` does; raises :class:`ConfigError`."""
        validate_group_config(overrides, broker)
        updated = {group: values for group, values in self.overrides.items() if group != group_id}
        configs = {group: config for group, config in self.configs.items() if group != group_id}
        if overrides:
            updated[group_id] = dict(overrides)
            configs[group_id] = GroupResourceConfig.of(overrides, broker)
        return GroupConfigs(_frozen(updated), MappingProxyType(configs))
