"""The explain report's inputs and outputs: what a partition looks like to ``kompakt log explain``.

Plain frozen dataclasses, free of the native kernels, so the broker and the web page can build
inputs and read reports without loading numba; :mod:`kompakt.inspect.explain` computes them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from kompakt.cleaner.readers import PartitionReaders
from kompakt.config.broker import BrokerConfig
from kompakt.config.defs import LONG_MAX, ConfigSource
from kompakt.config.describe import describe_topic_config
from kompakt.log.config import LogConfig

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
BOOL = npt.NDArray[np.bool_]

MAX_TOMBSTONES_LISTED: Final = 50
RELEVANT_TOPIC_CONFIGS: Final = (
    "cleanup.policy",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "delete.retention.ms",
    "segment.bytes",
    "segment.ms",
    "kompakt.tombstone.retain.for.groups",
    "kompakt.tombstone.max.hold.ms",
)
RELEVANT_BROKER_CONFIGS: Final = (
    "log.cleaner.enable",
    "log.cleaner.threads",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor",
)


def iso_ms(ms: int | None) -> str:
    """Milliseconds since the epoch as ISO-8601 UTC (``-`` for none, ``never`` for Long.MAX)."""
    if ms is None:
        return "-"
    if ms >= LONG_MAX or ms > 253_402_300_799_000:
        return "never"
    if ms < -62_135_596_800_000:
        return str(ms)
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def human_bytes(count: int) -> str:
    """A byte count a person reads at a glance (``104 B``, ``17.6 MiB``), in the binary units the
    configs are set in (``segment.bytes=1073741824`` is ``1.0 GiB``): the verdicts and the log map
    show these, the JSON keeps the exact numbers."""
    if count < 1024:
        return f"{count} B"
    value = float(count)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1023.95 or unit == "TiB":  # what would print as 1024.0 is the next unit
            break
    return f"{value:.1f} {unit}"


def duration(ms: int) -> str:
    """A short human duration (``1d 2h``, ``3m 4s``, ``250 ms``)."""
    if ms >= LONG_MAX:
        return "forever"
    sign = "-" if ms < 0 else ""
    ms = abs(ms)
    if ms < 1000:
        return f"{sign}{ms} ms"
    parts = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size:
            parts.append(f"{ms // size}{unit}")
            ms %= size
    return sign + " ".join(parts[:2])


# --------------------------------------------------------------------------------------------
# Input


@dataclass(frozen=True, slots=True)
class SegmentSource:
    """One segment to read: ``size_bytes`` bytes of ``path`` (a live segment may grow after).

    ``created_ms`` stands in for the segment's creation time where no batch timestamp exists
    (offline: the file's modification time).
    """

    base_offset: int
    path: Path
    size_bytes: int
    created_ms: int


@dataclass(frozen=True, slots=True)
class PartitionSource:
    """Everything the engine needs to know about one partition besides its configs."""

    topic: str
    partition: int
    segments: tuple[SegmentSource, ...]
    log_start_offset: int | None = None
    """From ``log-start-offset-checkpoint``; None means the first segment's base offset."""
    cleaner_checkpoint: int | None = None
    uncleanable_reason: str | None = None
    """Set by a broker that marked the partition uncleanable (KIP-346)."""
    readers: PartitionReaders | None = None
    """Where the partition's consumer groups and backups are (a live broker, or ``--bootstrap``);
    None when unknown (offline): named groups then count as having read nothing, as offline
    compaction assumes."""


@dataclass(frozen=True, slots=True)
class ConfigInput:
    """The configs to explain with: topic overrides (each with where it came from) on a broker."""

    overrides: Mapping[str, str]
    override_origins: Mapping[str, str]
    broker: BrokerConfig
    broker_origin: str = "broker config"
    broker_origins: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Where each broker config that is set came from (``server.properties FILE``, the cluster's
    broker, ``--broker-config``); names not listed are labelled ``broker_origin``."""


# --------------------------------------------------------------------------------------------
# Report


@dataclass(frozen=True, slots=True)
class ConfigValue:
    name: str
    value: str
    source: str


@dataclass(frozen=True, slots=True)
class Section:
    """``[first_offset, end_offset)`` of one section and its bytes (whole segments)."""

    name: str
    first_offset: int
    end_offset: int
    bytes: int


@dataclass(frozen=True, slots=True)
class SegmentReport:
    base_offset: int
    end_offset: int
    size_bytes: int
    section: str
    records: int
    largest_timestamp_ms: int
    estimated_earliest_timestamp_ms: int | None
    max_lag_deadline_ms: int | None
    overdue: bool


@dataclass(frozen=True, slots=True)
class Hold:
    """One bound on the cleanable part: what it is, where, and until when (None: no known time)."""

    kind: str  # "active segment", "min.compaction.lag.ms", "last stable offset"
    offset: int
    until_ms: int | None
    detail: str
    binding: bool


@dataclass(frozen=True, slots=True)
class MaxLag:
    max_compaction_lag_ms: int
    enabled: bool
    delay_ms: int
    must_clean_bytes: int
    must_clean_ratio: float
    deadline_ms: int | None
    deadline_detail: str


@dataclass(frozen=True, slots=True)
class ActiveSegment:
    base_offset: int
    size_bytes: int
    records: int
    first_timestamp_ms: int | None
    age_ms: int | None
    effective_segment_ms: int
    time_roll_ms: int | None
    bytes_until_size_roll: int
    forced_roll_ms: int | None
    rolls: str


@dataclass(frozen=True, slots=True)
class Tombstone:
    offset: int
    key: str
    delete_horizon_ms: int | None
    state: str
    removable_from_ms: int | None


@dataclass(frozen=True, slots=True)
class Tombstones:
    total: int
    live: int
    stamped_waiting: int
    past_horizon: int
    unstamped_cleanable: int
    unstamped_uncleanable: int
    earliest_waiting_horizon_ms: int | None
    delete_retention_ms: int
    listed: tuple[Tombstone, ...]
    #: Past their horizon, kept for readers that have not read them (counted in stamped_waiting).
    held_for_readers: int = 0


@dataclass(frozen=True, slots=True)
class ReaderRow:
    """One group's unread tombstones (:class:`kompakt.cleaner.readers.ReaderRisk` with its line)."""

    group: str
    committed_offset: int
    unread_tombstones: int
    first_unread_offset: int | None
    removal_ms: int | None
    holds: bool
    detail: str


@dataclass(frozen=True, slots=True)
class Readers:
    """The reader hold and the risk report of one partition."""

    known: bool
    retain_for_groups: tuple[str, ...]
    max_hold_ms: int
    hold_offset: int | None
    holders: tuple[tuple[str, int], ...]
    groups: tuple[ReaderRow, ...]
    detail: str


@dataclass(frozen=True, slots=True)
class Keys:
    records: int
    keyed_records: int
    null_key_records: int
    live_keys: int
    live_records: int
    dirty_records: int
    dirty_distinct_keys: int


@dataclass(frozen=True, slots=True)
class OffsetMapReport:
    dedupe_buffer_size: int
    threads: int
    load_factor: float
    buffer_per_thread: int
    slots: int
    keys_per_pass: int
    dirty_distinct_keys: int
    raw_bytes_needed: int
    bytes_needed: int
    passes_needed: int
    fits: bool


@dataclass(frozen=True, slots=True)
class PartitionExplain:
    """The whole answer for one partition. ``to_dict()`` is the JSON form."""

    topic: str
    partition: int
    now_ms: int
    verdict: str
    eligible: bool
    reason: str | None
    configs: tuple[ConfigValue, ...]
    log_start_offset: int
    first_dirty_offset: int
    first_uncleanable_offset: int
    log_end_offset: int
    last_stable_offset: int
    sections: tuple[Section, ...]
    total_bytes: int
    dirty_ratio: float
    min_cleanable_dirty_ratio: float
    holds: tuple[Hold, ...]
    max_lag: MaxLag
    active: ActiveSegment
    segments: tuple[SegmentReport, ...]
    tombstones: Tombstones
    keys: Keys
    estimated_bytes_after: int
    offset_map: OffsetMapReport
    uncleanable_reason: str | None = None
    readers: Readers | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --------------------------------------------------------------------------------------------
# Configs


def _source_label(source: ConfigSource, synonym: str, inp: ConfigInput, name: str) -> str:
    if source is ConfigSource.TOPIC_CONFIG:
        return f"topic override ({inp.override_origins.get(name, 'topic config')})"
    if source is ConfigSource.DEFAULT_CONFIG:
        return "Kafka default"
    return f"{inp.broker_origins.get(synonym, inp.broker_origin)}: {synonym}"


def resolve_configs(inp: ConfigInput) -> tuple[LogConfig, tuple[ConfigValue, ...]]:
    """The effective topic config and, for the configs that matter here, value and origin."""
    config = LogConfig.from_overrides(inp.overrides, inp.broker)
    rows: list[ConfigValue] = []
    entries = {e.name: e for e in describe_topic_config(inp.overrides, inp.broker)}
    for name in RELEVANT_TOPIC_CONFIGS:
        entry = entries[name]
        synonym = entry.synonyms[0].name if entry.synonyms else name
        text = entry.value if entry.value is not None else ""
        rows.append(ConfigValue(name, text, _source_label(entry.source, synonym, inp, name)))
    for name in RELEVANT_BROKER_CONFIGS:
        value, source = inp.broker.lookup(name)
        origin = inp.broker_origins.get(name, inp.broker_origin)
        label = "Kafka default" if source is ConfigSource.DEFAULT_CONFIG else f"{origin}: {name}"
        rows.append(ConfigValue(name, inp.broker.definition(name).format(value) or "", label))
    return config, tuple(rows)
