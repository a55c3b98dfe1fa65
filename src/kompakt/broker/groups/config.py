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
