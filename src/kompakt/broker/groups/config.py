"""The group coordinator's settings: typed views of the broker's ``group.*`` and ``offsets.*``
configs, by their Kafka names in snake_case with units.

The definitions, defaults and rules are :mod:`kompakt.config.group_defs` (Kafka's
``GroupCoordinatorConfig``); these classes only type them, built once by ``from_broker``. The
field defaults are read from the same table, so a default is written once. The rules run when the
broker config is built (before the data directory is opened) and again here, so settings built by
hand (tests) obey them too; both raise :class:`~kompakt.errors.ConfigError`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kompakt.config.broker import BrokerConfig
from kompakt.config.group_defs import MIGRATION_POLICIES, check_classic_rules, check_consumer_rules
from kompakt.config.tables import int_default, list_default, str_default

__all__ = ["MIGRATION_POLICIES", "ConsumerGroupConfig", "GroupConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    """The broker configs the classic group coordinator and the offsets manager read."""

    group_min_session_timeout_ms: int = int_default("group.min.session.timeout.ms")
    group_max_session_timeout_ms: int = int_default("group.max.session.timeout.ms")
    #: How long the first rebalance of an empty group waits for more members (tests use 0).
    group_initial_rebalance_delay_ms: int = int_default("group.initial.rebalance.delay.ms")
    group_max_size: int = int_default("group.max.size")
    offset_metadata_max_bytes: int = int_default("offset.metadata.max.bytes")
    offsets_retention_minutes: int = int_default("offsets.retention.minutes")
    offsets_retention_check_interval_ms: int = int_default("offsets.retention.check.interval.ms")

    def __post_init__(self) -> None:
        check_classic_rules(
            min_session_timeout_ms=self.group_min_session_timeout_ms,
            max_session_timeout_ms=self.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=self.group_initial_rebalance_delay_ms,
            max_size=self.group_max_size,
        )

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> GroupConfig:
        return cls(
            group_min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
            group_max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
            group_initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
            group_max_size=config.get_int("group.max.size"),
            offset_metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
            offsets_retention_minutes=config.get_int("offsets.retention.minutes"),
            offsets_retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
        )

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupConfig:
    """The ``group.consumer.*`` broker configs of KIP-848 consumer groups.

    The session timeout and heartbeat interval are the broker's (KIP-848 moved them off the
    client), unless a group has its own (``consumer.session.timeout.ms``, a GROUP config resource:
    ``ConsumerGroupCoordinator.session_timeout_ms``); ``assignors`` lists the server assignors
    members may name, the first being the default.
    """

    session_timeout_ms: int = int_default("group.consumer.session.timeout.ms")
    min_session_timeout_ms: int = int_default("group.consumer.min.session.timeout.ms")
    max_session_timeout_ms: int = int_default("group.consumer.max.session.timeout.ms")
    heartbeat_interval_ms: int = int_default("group.consumer.heartbeat.interval.ms")
    min_heartbeat_interval_ms: int = int_default("group.consumer.min.heartbeat.interval.ms")
    max_heartbeat_interval_ms: int = int_default("group.consumer.max.heartbeat.interval.ms")
    max_size: int = int_default("group.consumer.max.size")
    assignors: tuple[str, ...] = list_default("group.consumer.assignors")
    migration_policy: str = str_default("group.consumer.migration.policy")

    def __post_init__(self) -> None:
        check_consumer_rules(
            session_timeout_ms=self.session_timeout_ms,
            min_session_timeout_ms=self.min_session_timeout_ms,
            max_session_timeout_ms=self.max_session_timeout_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            min_heartbeat_interval_ms=self.min_heartbeat_interval_ms,
            max_heartbeat_interval_ms=self.max_heartbeat_interval_ms,
            max_size=self.max_size,
            assignors=self.assignors,
            migration_policy=self.migration_policy,
        )

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> ConsumerGroupConfig:
        return cls(
            session_timeout_ms=config.get_int("group.consumer.session.timeout.ms"),
            min_session_timeout_ms=config.get_int("group.consumer.min.session.timeout.ms"),
            max_session_timeout_ms=config.get_int("group.consumer.max.session.timeout.ms"),
            heartbeat_interval_ms=config.get_int("group.consumer.heartbeat.interval.ms"),
            min_heartbeat_interval_ms=config.get_int("group.consumer.min.heartbeat.interval.ms"),
            max_heartbeat_interval_ms=config.get_int("group.consumer.max.heartbeat.interval.ms"),
            max_size=config.get_int("group.consumer.max.size"),
            assignors=config.get_list("group.consumer.assignors"),
            # Kafka's ConsumerGroupMigrationPolicy.parse is case-insensitive.
            migration_policy=(config.get_str("group.consumer.migration.policy") or "").lower(),
        )
