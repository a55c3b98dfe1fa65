"""Group coordinator settings, by their Kafka broker config names in snake_case with units."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    """The broker configs the classic group coordinator reads (Kafka's defaults)."""

    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    #: How long the first rebalance of an empty group waits for more members (tests use 0).
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4_096
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000

    def __post_init__(self) -> None:
        if not 0 <= self.group_min_session_timeout_ms <= self.group_max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms must be within 0..group.max.session.timeout.ms")
        if self.group_initial_rebalance_delay_ms < 0:
            raise ValueError("group.initial.rebalance.delay.ms must not be negative")
        if self.group_max_size < 1:
            raise ValueError("group.max.size must be at least 1")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000


#: ``group.consumer.migration.policy`` values (Kafka's ``ConsumerGroupMigrationPolicy``).
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupConfig:
    """The ``group.consumer.*`` broker configs of KIP-848 consumer groups (Kafka 4.1's defaults).

    The session timeout and heartbeat interval are the broker's (KIP-848 moved them off the client);
    ``assignors`` lists the server assignors members may name, the first being the default.
    """

    session_timeout_ms: int = 45_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    heartbeat_interval_ms: int = 5_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")
    migration_policy: str = "bidirectional"

    def __post_init__(self) -> None:
        if not self.min_session_timeout_ms <= self.session_timeout_ms <= self.max_session_timeout_ms:
            raise ValueError(
                "group.consumer.session.timeout.ms must be within "
                "group.consumer.min.session.timeout.ms..group.consumer.max.session.timeout.ms"
            )
        if not self.min_heartbeat_interval_ms <= self.heartbeat_interval_ms <= self.max_heartbeat_interval_ms:
            raise ValueError(
                "group.consumer.heartbeat.interval.ms must be within "
                "group.consumer.min.heartbeat.interval.ms..group.consumer.max.heartbeat.interval.ms"
            )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"
            )
        if self.max_size < 1:
            raise ValueError("group.consumer.max.size must be at least 1")
        if not self.assignors:
            raise ValueError("group.consumer.assignors must name at least one assignor")
        if self.migration_policy not in MIGRATION_POLICIES:
            raise ValueError(
                f"group.consumer.migration.policy must be one of {', '.join(MIGRATION_POLICIES)}"
            )
