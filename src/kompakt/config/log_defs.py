"""The log's configs (Kafka's ``LogConfig``, ``ServerLogConfigs`` and ``CleanerConfig``): every
topic config with its broker synonyms, the ``log.*`` broker configs, the cleaner's, and their
cross-field rules.

Topic configs fall back to their broker synonyms in the listed order (the first one set wins),
then to the built-in default. A synonym may carry a unit: ``log.roll.hours`` is multiplied by
3600000 to give ``segment.ms``. Defaults, ranges and synonym orders are Kafka's (see
``LogConfig``, ``TopicConfig`` and ``ServerLogConfigs``), with one deliberate difference:
``max.compaction.lag.ms`` accepts 0, meaning "disabled" (the KIP-354 public interface), where Kafka's
validator says at least 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from kompakt.config.defs import (
    BOOL,
    DBL,
    DOUBLE_MAX,
    INT,
    LIST,
    LONG,
    LONG_MAX,
    STR,
    ConfigDef,
    ConfigType,
    ConfigValue,
    GzipLevel,
    Lookup,
    Range,
    ThrottledReplicas,
    Validator,
    ValidList,
    ValidString,
    define,
    format_any,
    invalid,
)
from kompakt.errors import ConfigError, InvalidConfigurationError

MS_PER_MINUTE = 60_000
#: kompakt's own topic (and broker default) configs of the reader hold (``kompakt.cleaner.readers``).
TOMBSTONE_RETAIN_FOR_GROUPS = "kompakt.tombstone.retain.for.groups"
TOMBSTONE_MAX_HOLD_MS = "kompakt.tombstone.max.hold.ms"
MS_PER_HOUR = 3_600_000
#: Kafka 4.1's floor of segment.bytes and log.segment.bytes (KIP-1030): ``atLeast(1024 * 1024)``.
SEGMENT_BYTES_MIN = 1_048_576
#: Kafka 4.1's internal topic config that overrides segment.bytes below that floor, for tests.
INTERNAL_SEGMENT_BYTES = "internal.segment.bytes"

CLEANUP_POLICIES = ("compact", "delete")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

#: Kafka 3.9's ``MetadataVersion`` releases and internal versions, the values
#: ``message.format.version`` accepts (``MetadataVersionValidator``).
_METADATA_RELEASES = (
    "0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0", "0.10.1", "0.10.2", "0.11.0", "1.0", "1.1", "2.0",
    "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "3.0", "3.1", "3.2", "3.3", "3.4", "3.5",
    "3.6", "3.7", "3.8", "3.9",
)  # fmt: skip
_INTERNAL_VERSIONS = {
    "0.10.0": 2, "0.10.1": 3, "0.10.2": 1, "0.11.0": 3, "1.0": 1, "1.1": 1, "2.0": 2, "2.1": 3,
    "2.2": 2, "2.3": 2, "2.4": 2, "2.5": 1, "2.6": 1, "2.7": 3, "2.8": 2, "3.0": 2, "3.1": 1, "3.2": 1,
    "3.3": 4, "3.4": 1, "3.5": 3, "3.6": 3, "3.7": 5, "3.8": 1, "3.9": 1, "4.0": 2,
}  # fmt: skip
METADATA_VERSIONS: frozenset[str] = frozenset(
    {*_METADATA_RELEASES, *(f"{r}-IV{i}" for r, n in _INTERNAL_VERSIONS.items() for i in range(n))}
)
#: Kafka 3.9's default of ``message.format.version`` (``IBP_3_0_IV1``).
DEFAULT_MESSAGE_FORMAT_VERSION = "3.0-IV1"


@dataclass(frozen=True, slots=True)
class MessageFormatVersion:
    """Kafka 3.9's ``MetadataVersionValidator``: a version ``MetadataVersion.fromVersionString``
    knows, whose segments past the release (``3.0.1``) are ignored."""

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if not isinstance(value, str):
            return
        segments = value.split(".")
        keep = 3 if value.startswith("0.") else 2
        key = value if keep >= len(segments) else ".".join(segments[:keep])
        if key not in METADATA_VERSIONS:
            raise invalid(name, value, f"Version {value} is not a valid version")


@dataclass(frozen=True, slots=True)
class GroupIds:
    """A list of consumer group ids: each non-empty (a group id is any non-empty string; the list
    is comma-separated, so an id cannot contain a comma)."""

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if not isinstance(value, tuple):
            return
        for group in value:
            if not isinstance(group, str) or not group.strip():
                raise invalid(name, ",".join(map(str, value)), "a group id must not be empty")


@dataclass(frozen=True, slots=True)
class Synonym:
    """A broker config that supplies a topic config's default, times ``scale`` (a unit change)."""

    name: str
    scale: int = 1


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    """A topic config and the broker configs it falls back to, in priority order."""

    definition: ConfigDef
    synonyms: tuple[Synonym, ...]
    #: Kafka's ``defineInternal``: accepted on a topic, listed by DescribeConfigs only when set.
    internal: bool = False

    @property
    def name(self) -> str:
        return self.definition.name


def _t(
    name: str,
    kind: ConfigType,
    default: ConfigValue,
    doc: str,
    validator: Validator | None = None,
    synonyms: tuple[str | tuple[str, int], ...] = (),
    *,
    internal: bool = False,
) -> TopicConfigDef:
    syns = tuple(Synonym(s) if isinstance(s, str) else Synonym(s[0], s[1]) for s in synonyms)
    return TopicConfigDef(ConfigDef(name, kind, default, doc, validator), syns, internal)


_compression_doc = "Final codec of the topic's data; 'producer' keeps the producer's codec."
TOPIC_CONFIG_DEFS: tuple[TopicConfigDef, ...] = (
    _t("cleanup.policy", LIST, ("delete",),
       "Retention policy: 'delete' drops old segments by time/size, 'compact' keeps the latest "
       "value per key; both may be set, and an empty list keeps everything forever.",
       ValidList(CLEANUP_POLICIES, case_insensitive=True), ("log.cleanup.policy",)),
    _t("compression.type", STR, "producer", _compression_doc, ValidString(COMPRESSION_TYPES),
       ("compression.type",)),
    _t("compression.gzip.level", INT, -1, "Gzip level used when compression.type is gzip.",
       GzipLevel(), ("compression.gzip.level",)),
    _t("compression.lz4.level", INT, 9, "LZ4 level used when compression.type is lz4.",
       Range(1, 17), ("compression.lz4.level",)),
    _t("compression.zstd.level", INT, 3, "Zstandard level used when compression.type is zstd.",
       Range(-131072, 22), ("compression.zstd.level",)),
    _t("delete.retention.ms", LONG, 86_400_000,
       "How long tombstones and removable transaction markers survive after their batch was "
       "stamped with a delete horizon, in ms.", Range(0), ("log.cleaner.delete.retention.ms",)),
    _t("file.delete.delay.ms", LONG, 60_000,
       "Delay in ms between renaming a segment to .deleted and removing its files.", Range(0),
       ("log.segment.delete.delay.ms",)),
    _t("flush.messages", LONG, LONG_MAX, "Messages appended between forced fsyncs of the log.",
       Range(1), ("log.flush.interval.messages",)),
    _t("flush.ms", LONG, LONG_MAX, "Milliseconds between forced fsyncs of the log.", Range(0),
       ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")),
    _t("follower.replication.throttled.replicas", LIST, (),
       "Replicas whose follower replication is throttled ('*' or partition:broker pairs).",
       ThrottledReplicas()),
    _t("index.interval.bytes", INT, 4096, "Bytes of log between two offset index entries.",
       Range(0), ("log.index.interval.bytes",)),
    _t("leader.replication.throttled.replicas", LIST, (),
       "Replicas whose leader replication is throttled ('*' or partition:broker pairs).",
       ThrottledReplicas()),
    _t("local.retention.bytes", LONG, -2, "Tiered storage local size limit; -2 follows retention.bytes.",
       Range(-2), ("log.local.retention.bytes",)),
    _t("local.retention.ms", LONG, -2, "Tiered storage local time limit; -2 follows retention.ms.",
       Range(-2), ("log.local.retention.ms",)),
    _t("max.compaction.lag.ms", LONG, LONG_MAX,
       "Longest time in ms a record may stay uncompacted; 0 disables the limit.", Range(0),
       ("log.cleaner.max.compaction.lag.ms",)),
    _t("max.message.bytes", INT, 1_048_588, "Largest record batch size in bytes accepted on append.",
       Range(0), ("message.max.bytes",)),
    _t("message.format.version", STR, DEFAULT_MESSAGE_FORMAT_VERSION,
       "[DEPRECATED, accepted and ignored] The record format of old brokers; Kafka 3.9 ignores it for "
       "every inter.broker.protocol.version of 3.0 or higher, and kompakt always writes the current "
       "(v2) format. Kafka 4.0 removed it.", MessageFormatVersion(), ("log.message.format.version",)),
    _t("message.timestamp.after.max.ms", LONG, 3_600_000,
       "How far in ms a CreateTime timestamp may be ahead of the broker's time.", Range(0),
       ("log.message.timestamp.after.max.ms",)),
    _t("message.timestamp.before.max.ms", LONG, LONG_MAX,
       "How far in ms a CreateTime timestamp may be behind the broker's time.", Range(0),
       ("log.message.timestamp.before.max.ms",)),
    _t("message.timestamp.type", STR, "CreateTime",
       "Whether batch timestamps come from the producer (CreateTime) or the broker (LogAppendTime).",
       ValidString(TIMESTAMP_TYPES), ("log.message.timestamp.type",)),
    _t("min.cleanable.dirty.ratio", DBL, 0.5,
       "A log is cleaned when its dirty share of bytes is strictly above this ratio.",
       Range(0, 1), ("log.cleaner.min.cleanable.ratio",)),
    _t("min.compaction.lag.ms", LONG, 0, "Minimum age in ms before a record may be compacted.",
       Range(0), ("log.cleaner.min.compaction.lag.ms",)),
    _t("min.insync.replicas", INT, 1, "In-sync replicas required for acks=all writes.", Range(1),
       ("min.insync.replicas",)),
    _t("preallocate", BOOL, False, "Create new segment files at their full size.", None,
       ("log.preallocate",)),
    _t("remote.storage.enable", BOOL, False, "Tiered storage for this topic (unsupported)."),
    _t("retention.bytes", LONG, -1, "Size limit per partition in bytes under 'delete'; -1 is no limit.",
       None, ("log.retention.bytes",)),
    _t("retention.ms", LONG, 604_800_000, "Age limit in ms under 'delete'; -1 is no limit.", Range(-1),
       ("log.retention.ms", ("log.retention.minutes", MS_PER_MINUTE),
        ("log.retention.hours", MS_PER_HOUR))),
    _t("segment.bytes", INT, 1_073_741_824, "Largest segment file size in bytes (at least 1 MiB, "
       "as Kafka 4.1 has it since KIP-1030; tests use internal.segment.bytes for smaller ones).",
       Range(SEGMENT_BYTES_MIN), ("log.segment.bytes",)),
    _t("segment.index.bytes", INT, 10_485_760, "Preallocated size in bytes of each index file.",
       Range(4), ("log.index.size.max.bytes",)),
    _t("segment.jitter.ms", LONG, 0, "Random jitter in ms subtracted from each segment's roll time.",
       Range(0), ("log.roll.jitter.ms", ("log.roll.jitter.hours", MS_PER_HOUR))),
    _t("segment.ms", LONG, 604_800_000, "Time in ms after which the active segment is rolled.",
       Range(1), ("log.roll.ms", ("log.roll.hours", MS_PER_HOUR))),
    _t("unclean.leader.election.enable", BOOL, False,
       "Allow an out-of-sync replica to become leader.", None,
       ("unclean.leader.election.enable",)),
    # kompakt's own (not Kafka's): tombstone removal waits for named consumer groups
    # (kompakt.cleaner.readers).
    _t(TOMBSTONE_RETAIN_FOR_GROUPS, LIST, (),
       "[kompakt] Consumer groups that must read a tombstone or transaction marker before the "
       "cleaner removes it: past its delete horizon it stays until every named group that exists "
       "has committed an offset past it on the partition (a group with no offset there holds from "
       "offset 0), or until kompakt.tombstone.max.hold.ms more have passed.", GroupIds(),
       (TOMBSTONE_RETAIN_FOR_GROUPS,)),
    # Kafka 4.1's internal override of segment.bytes (LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG): no
    # lower bound, so tests can roll segments of a few hundred bytes; it wins over segment.bytes.
    _t(INTERNAL_SEGMENT_BYTES, INT, None,
       "[internal, for tests] The maximum size of a single log file, overriding segment.bytes "
       "without its 1 MiB minimum (Kafka 4.1's internal.segment.bytes).", internal=True),
    _t(TOMBSTONE_MAX_HOLD_MS, LONG, 604_800_000,
       "[kompakt] Longest time in ms past its delete horizon that a tombstone or marker is kept "
       "for the groups of kompakt.tombstone.retain.for.groups (and for running kompakt backups).",
       Range(0), (TOMBSTONE_MAX_HOLD_MS,)),
)  # fmt: skip

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in TOPIC_CONFIG_DEFS}


def topic_default(name: str) -> ConfigValue:
    """A topic config's built-in default (what :class:`~kompakt.log.config.LogConfig`'s fields
    default to, so that each default is written once, in the table above)."""
    return TOPIC_CONFIGS[name].definition.default


#: The broker configs that supply the topic configs' defaults (``log.roll.hours`` and the like).
LOG_SYNONYM_BROKER_DEFS: tuple[ConfigDef, ...] = (
    define("log.cleanup.policy", LIST, ("delete",), "Default cleanup.policy.",
           ValidList(CLEANUP_POLICIES, case_insensitive=True)),
    define("compression.type", STR, "producer", _compression_doc, ValidString(COMPRESSION_TYPES)),
    define("compression.gzip.level", INT, -1, "Default compression.gzip.level.", GzipLevel()),
    define("compression.lz4.level", INT, 9, "Default compression.lz4.level.", Range(1, 17)),
    define("compression.zstd.level", INT, 3, "Default compression.zstd.level.", Range(-131072, 22)),
    define("log.cleaner.delete.retention.ms", LONG, 86_400_000, "Default delete.retention.ms.", Range(0)),
    define("log.segment.delete.delay.ms", LONG, 60_000, "Default file.delete.delay.ms.", Range(0)),
    define("log.flush.interval.messages", LONG, LONG_MAX, "Default flush.messages.", Range(1)),
    define("log.flush.interval.ms", LONG, None, "Default flush.ms; falls back to "
           "log.flush.scheduler.interval.ms."),
    define("log.flush.scheduler.interval.ms", LONG, LONG_MAX, "Fallback for flush.ms."),
    define("log.index.interval.bytes", INT, 4096, "Default index.interval.bytes.", Range(0)),
    define("log.local.retention.bytes", LONG, -2, "Default local.retention.bytes.", Range(-2)),
    define("log.local.retention.ms", LONG, -2, "Default local.retention.ms.", Range(-2)),
    define("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX, "Default max.compaction.lag.ms.", Range(0)),
    define("message.max.bytes", INT, 1_048_588, "Default max.message.bytes; also bounds the cleaner's "
           "I/O buffer growth.", Range(0)),
    define("log.message.format.version", STR, DEFAULT_MESSAGE_FORMAT_VERSION,
           "[DEPRECATED, accepted and ignored] Default message.format.version (Kafka 3.9's).",
           MessageFormatVersion()),
    define("log.message.timestamp.after.max.ms", LONG, 3_600_000, "Default message.timestamp.after.max.ms.",
           Range(0)),
    define("log.message.timestamp.before.max.ms", LONG, LONG_MAX,
           "Default message.timestamp.before.max.ms.", Range(0)),
    define("log.message.timestamp.type", STR, "CreateTime", "Default message.timestamp.type.",
           ValidString(TIMESTAMP_TYPES)),
    define("log.cleaner.min.cleanable.ratio", DBL, 0.5, "Default min.cleanable.dirty.ratio.", Range(0, 1)),
    define("log.cleaner.min.compaction.lag.ms", LONG, 0, "Default min.compaction.lag.ms.", Range(0)),
    define("min.insync.replicas", INT, 1, "Default min.insync.replicas.", Range(1)),
    define("log.preallocate", BOOL, False, "Default preallocate."),
    define("log.retention.bytes", LONG, -1, "Default retention.bytes."),
    define("log.retention.ms", LONG, None, "Default retention.ms; wins over the minutes and hours forms."),
    define("log.retention.minutes", INT, None, "Default retention.ms in minutes; wins over hours."),
    define("log.retention.hours", INT, 168, "Default retention.ms in hours."),
    define("log.segment.bytes", INT, 1_073_741_824, "Default segment.bytes.", Range(SEGMENT_BYTES_MIN)),
    define("log.index.size.max.bytes", INT, 10_485_760, "Default segment.index.bytes.", Range(4)),
    define("log.roll.jitter.ms", LONG, None, "Default segment.jitter.ms; wins over the hours form."),
    define("log.roll.jitter.hours", INT, 0, "Default segment.jitter.ms in hours.", Range(0)),
    define("log.roll.ms", LONG, None, "Default segment.ms; wins over the hours form."),
    define("log.roll.hours", INT, 168, "Default segment.ms in hours.", Range(1)),
    define("unclean.leader.election.enable", BOOL, False, "Default unclean.leader.election.enable."),
    define(TOMBSTONE_RETAIN_FOR_GROUPS, LIST, (), "[kompakt] Default kompakt.tombstone.retain.for.groups.",
           GroupIds()),
    define(TOMBSTONE_MAX_HOLD_MS, LONG, 604_800_000, "[kompakt] Default kompakt.tombstone.max.hold.ms.",
           Range(0)),
)  # fmt: skip

#: The log's and the cleaner's own broker configs (no topic config falls back to them).
LOG_BROKER_DEFS: tuple[ConfigDef, ...] = (
    define("log.cleaner.enable", BOOL, True, "Run the log cleaner (deprecated; restart to change).",
           dynamic=False),
    define("log.cleaner.threads", INT, 1, "Number of cleaner threads.", Range(0)),
    define("log.cleaner.dedupe.buffer.size", LONG, 134_217_728,
           "Total offset-map memory in bytes over all cleaner threads."),
    define("log.cleaner.io.buffer.load.factor", DBL, 0.9, "Load factor of the offset map (dedupe buffer)."),
    define("log.cleaner.io.buffer.size", INT, 524_288, "Total cleaner I/O buffer memory in bytes.",
           Range(0)),
    define("log.cleaner.io.max.bytes.per.second", DBL, DOUBLE_MAX,
           "Throttle for the cleaner's read plus write bytes per second."),
    define("log.cleaner.backoff.ms", LONG, 15_000, "Sleep in ms when a cleaner pass found nothing to do.",
           Range(0)),
    define("log.retention.check.interval.ms", LONG, 300_000,
           "Period in ms of the retention task for non-compacted logs.", Range(1), dynamic=False),
    define("log.flush.offset.checkpoint.interval.ms", INT, 60_000,
           "Period in ms for writing recovery-point-offset-checkpoint.", Range(0), dynamic=False),
    define("log.flush.start.offset.checkpoint.interval.ms", INT, 60_000,
           "Period in ms for writing log-start-offset-checkpoint.", Range(0), dynamic=False),
    define("replica.high.watermark.checkpoint.interval.ms", LONG, 5000,
           "Period in ms for writing replication-offset-checkpoint.", dynamic=False),
    define("log.initial.task.delay.ms", LONG, 30_000,
           "Delay in ms before the first retention, flush and checkpoint tasks.", Range(0),
           dynamic=False),
    define("log.dirs", STR, None, "Data directories (kompakt uses exactly one).", dynamic=False),
    define("log.dir", STR, "/tmp/kafka-logs", "Data directory used when log.dirs is not set.",
           dynamic=False),
)  # fmt: skip

#: The cleaner's configs that AlterConfigs may change at runtime (Kafka's
#: ``CleanerConfig.RECONFIGURABLE_CONFIGS``); the cleaner reconfigures itself when one changes.
DYNAMIC_CLEANER_KEYS: frozenset[str] = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "message.max.bytes",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
    }
)

# Broker name -> the topic config it supplies a default for (for "did you mean" hints).
TOPIC_NAME_OF_BROKER_SYNONYM: dict[str, str] = {
    syn.name: d.name for d in TOPIC_CONFIG_DEFS for syn in d.synonyms if syn.name != d.name
}


ONE_MIB = 1024 * 1024


def validate_compaction_lags(min_lag_ms: int, max_lag_ms: int, kind: str = "topic") -> None:
    """Kafka's cross-field rule; a 0 maximum means "disabled" and so never conflicts."""
    if max_lag_ms != 0 and min_lag_ms > max_lag_ms:
        raise InvalidConfigurationError(
            f"conflict {kind} config setting min.compaction.lag.ms ({min_lag_ms}) > "
            f"max.compaction.lag.ms ({max_lag_ms})"
        )


def check_log_rules(config: Lookup) -> None:
    """The cleaner's cross-field rules (Kafka's ``KafkaConfig`` and ``CleanerConfig`` checks)."""
    threads = config.get_int("log.cleaner.threads")
    if (
        config.get_bool("log.cleaner.enable")
        and threads > 0
        and config.get_int("log.cleaner.dedupe.buffer.size") // threads <= ONE_MIB
    ):
        raise ConfigError("log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread.")
    load_factor = config.get_float("log.cleaner.io.buffer.load.factor")
    if not 0.0 < load_factor <= 1.0:
        raise ConfigError(
            f"Invalid value {format_any(load_factor)} for configuration "
            "log.cleaner.io.buffer.load.factor: Value must be in (0, 1]"
        )
    validate_compaction_lags(
        config.get_int("log.cleaner.min.compaction.lag.ms"),
        config.get_int("log.cleaner.max.compaction.lag.ms"),
        "broker",
    )
