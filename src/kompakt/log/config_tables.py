"""The config tables: every topic config with its broker synonyms, and every broker config.

Topic configs fall back to their broker synonyms in the listed order (the first one set wins),
then to the built-in default. A synonym may carry a unit: ``log.roll.hours`` is multiplied by
3600000 to give ``segment.ms``. Defaults, ranges and synonym orders are Kafka's (see
``LogConfig``, ``TopicConfig`` and ``ServerLogConfigs``), with one deliberate difference:
``max.compaction.lag.ms`` accepts 0, meaning "disabled" (the KIP-354 public interface), where Kafka's
validator says at least 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from kompakt.log.config_defs import (
    DOUBLE_MAX,
    LONG_MAX,
    ConfigDef,
    ConfigType,
    ConfigValue,
    GzipLevel,
    Range,
    ThrottledReplicas,
    Validator,
    ValidList,
    ValidString,
    invalid,
)
from kompakt.log.kafka_configs import config_def_of, kafka_broker_configs

MS_PER_MINUTE = 60_000
#: kompakt's own topic (and broker default) configs of the reader hold (``kompakt.cleaner.readers``).
TOMBSTONE_RETAIN_FOR_GROUPS = "kompakt.tombstone.retain.for.groups"
TOMBSTONE_MAX_HOLD_MS = "kompakt.tombstone.max.hold.ms"
MS_PER_HOUR = 3_600_000

BOOL, STR, INT, LONG, DBL, LIST = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)

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
) -> TopicConfigDef:
    syns = tuple(Synonym(s) if isinstance(s, str) else Synonym(s[0], s[1]) for s in synonyms)
    return TopicConfigDef(ConfigDef(name, kind, default, doc, validator), syns)


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
    _t("message.timestamp.after.max.ms", LONG, LONG_MAX,
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
    _t("segment.bytes", INT, 1_073_741_824, "Largest segment file size in bytes.", Range(14),
       ("log.segment.bytes",)),
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
    _t(TOMBSTONE_MAX_HOLD_MS, LONG, 604_800_000,
       "[kompakt] Longest time in ms past its delete horizon that a tombstone or marker is kept "
       "for the groups of kompakt.tombstone.retain.for.groups (and for running kompakt backups).",
       Range(0), (TOMBSTONE_MAX_HOLD_MS,)),
)  # fmt: skip

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in TOPIC_CONFIG_DEFS}


def _b(
    name: str,
    kind: ConfigType,
    default: ConfigValue,
    doc: str,
    validator: Validator | None = None,
    dynamic: bool = True,
) -> ConfigDef:
    return ConfigDef(name, kind, default, doc, validator, dynamic)


_SYNONYM_BROKER_DEFS: tuple[ConfigDef, ...] = (
    _b("log.cleanup.policy", LIST, ("delete",), "Default cleanup.policy.",
       ValidList(CLEANUP_POLICIES, case_insensitive=True)),
    _b("compression.type", STR, "producer", _compression_doc, ValidString(COMPRESSION_TYPES)),
    _b("compression.gzip.level", INT, -1, "Default compression.gzip.level.", GzipLevel()),
    _b("compression.lz4.level", INT, 9, "Default compression.lz4.level.", Range(1, 17)),
    _b("compression.zstd.level", INT, 3, "Default compression.zstd.level.", Range(-131072, 22)),
    _b("log.cleaner.delete.retention.ms", LONG, 86_400_000, "Default delete.retention.ms.", Range(0)),
    _b("log.segment.delete.delay.ms", LONG, 60_000, "Default file.delete.delay.ms.", Range(0)),
    _b("log.flush.interval.messages", LONG, LONG_MAX, "Default flush.messages.", Range(1)),
    _b("log.flush.interval.ms", LONG, None, "Default flush.ms; falls back to "
       "log.flush.scheduler.interval.ms."),
    _b("log.flush.scheduler.interval.ms", LONG, LONG_MAX, "Fallback for flush.ms."),
    _b("log.index.interval.bytes", INT, 4096, "Default index.interval.bytes.", Range(0)),
    _b("log.local.retention.bytes", LONG, -2, "Default local.retention.bytes.", Range(-2)),
    _b("log.local.retention.ms", LONG, -2, "Default local.retention.ms.", Range(-2)),
    _b("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX, "Default max.compaction.lag.ms.", Range(0)),
    _b("message.max.bytes", INT, 1_048_588, "Default max.message.bytes; also bounds the cleaner's "
       "I/O buffer growth.", Range(0)),
    _b("log.message.format.version", STR, DEFAULT_MESSAGE_FORMAT_VERSION,
       "[DEPRECATED, accepted and ignored] Default message.format.version (Kafka 3.9's).",
       MessageFormatVersion()),
    _b("log.message.timestamp.after.max.ms", LONG, LONG_MAX, "Default message.timestamp.after.max.ms.",
       Range(0)),
    _b("log.message.timestamp.before.max.ms", LONG, LONG_MAX,
       "Default message.timestamp.before.max.ms.", Range(0)),
    _b("log.message.timestamp.type", STR, "CreateTime", "Default message.timestamp.type.",
       ValidString(TIMESTAMP_TYPES)),
    _b("log.cleaner.min.cleanable.ratio", DBL, 0.5, "Default min.cleanable.dirty.ratio.", Range(0, 1)),
    _b("log.cleaner.min.compaction.lag.ms", LONG, 0, "Default min.compaction.lag.ms.", Range(0)),
    _b("min.insync.replicas", INT, 1, "Default min.insync.replicas.", Range(1)),
    _b("log.preallocate", BOOL, False, "Default preallocate."),
    _b("log.retention.bytes", LONG, -1, "Default retention.bytes."),
    _b("log.retention.ms", LONG, None, "Default retention.ms; wins over the minutes and hours forms."),
    _b("log.retention.minutes", INT, None, "Default retention.ms in minutes; wins over hours."),
    _b("log.retention.hours", INT, 168, "Default retention.ms in hours."),
    _b("log.segment.bytes", INT, 1_073_741_824, "Default segment.bytes.", Range(14)),
    _b("log.index.size.max.bytes", INT, 10_485_760, "Default segment.index.bytes.", Range(4)),
    _b("log.roll.jitter.ms", LONG, None, "Default segment.jitter.ms; wins over the hours form."),
    _b("log.roll.jitter.hours", INT, 0, "Default segment.jitter.ms in hours.", Range(0)),
    _b("log.roll.ms", LONG, None, "Default segment.ms; wins over the hours form."),
    _b("log.roll.hours", INT, 168, "Default segment.ms in hours.", Range(1)),
    _b("unclean.leader.election.enable", BOOL, False, "Default unclean.leader.election.enable."),
    _b(TOMBSTONE_RETAIN_FOR_GROUPS, LIST, (), "[kompakt] Default kompakt.tombstone.retain.for.groups.",
       GroupIds()),
    _b(TOMBSTONE_MAX_HOLD_MS, LONG, 604_800_000, "[kompakt] Default kompakt.tombstone.max.hold.ms.",
       Range(0)),
)  # fmt: skip

_BROKER_ONLY_DEFS: tuple[ConfigDef, ...] = (
    _b("log.cleaner.enable", BOOL, True, "Run the log cleaner (deprecated; restart to change).",
       dynamic=False),
    _b("log.cleaner.threads", INT, 1, "Number of cleaner threads.", Range(0)),
    _b("log.cleaner.dedupe.buffer.size", LONG, 134_217_728,
       "Total offset-map memory in bytes over all cleaner threads."),
    _b("log.cleaner.io.buffer.load.factor", DBL, 0.9, "Load factor of the offset map (dedupe buffer)."),
    _b("log.cleaner.io.buffer.size", INT, 524_288, "Total cleaner I/O buffer memory in bytes.",
       Range(0)),
    _b("log.cleaner.io.max.bytes.per.second", DBL, DOUBLE_MAX,
       "Throttle for the cleaner's read plus write bytes per second."),
    _b("log.cleaner.backoff.ms", LONG, 15_000, "Sleep in ms when a cleaner pass found nothing to do.",
       Range(0)),
    _b("log.retention.check.interval.ms", LONG, 300_000,
       "Period in ms of the retention task for non-compacted logs.", Range(1), dynamic=False),
    _b("log.flush.offset.checkpoint.interval.ms", INT, 60_000,
       "Period in ms for writing recovery-point-offset-checkpoint.", Range(0), dynamic=False),
    _b("log.flush.start.offset.checkpoint.interval.ms", INT, 60_000,
       "Period in ms for writing log-start-offset-checkpoint.", Range(0), dynamic=False),
    _b("replica.high.watermark.checkpoint.interval.ms", LONG, 5000,
       "Period in ms for writing replication-offset-checkpoint.", dynamic=False),
    _b("log.initial.task.delay.ms", LONG, 30_000,
       "Delay in ms before the first retention, flush and checkpoint tasks.", Range(0),
       dynamic=False),
    _b("producer.id.expiration.ms", INT, 86_400_000, "Idle time in ms after which a producer id "
       "expires.", Range(1)),
    _b("producer.id.expiration.check.interval.ms", INT, 600_000,
       "Period in ms of the producer id expiration check.", Range(1), dynamic=False),
    _b("transaction.max.timeout.ms", INT, 900_000, "Largest transaction timeout a producer may ask.",
       Range(1), dynamic=False),
    _b("transactional.id.expiration.ms", INT, 604_800_000,
       "Idle time in ms after which a transactional id expires.", Range(1), dynamic=False),
    _b("transaction.state.log.num.partitions", INT, 50, "Partitions of __transaction_state.",
       Range(1), dynamic=False),
    _b("transaction.state.log.segment.bytes", INT, 104_857_600,
       "segment.bytes of __transaction_state.", Range(1), dynamic=False),
    _b("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10_000,
       "Period in ms of the check that aborts transactions open past their timeout.", Range(1),
       dynamic=False),
    _b("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3_600_000,
       "Period in ms of the check that expires idle transactional ids.", Range(1), dynamic=False),
    _b("transaction.partition.verification.enable", BOOL, True,
       "Verify with the coordinator that a transactional write's partition is in its transaction "
       "(KIP-890).", dynamic=False),
    _b("num.partitions", INT, 1, "Partitions of an auto-created topic.", Range(1), dynamic=False),
    _b("default.replication.factor", INT, 1, "Replication factor of an auto-created topic.",
       dynamic=False),
    _b("auto.create.topics.enable", BOOL, True, "Create unknown topics on metadata/produce requests.",
       dynamic=False),
    _b("delete.topic.enable", BOOL, True, "Allow DeleteTopics.", dynamic=False),
    _b("listeners", STR, "PLAINTEXT://:9092", "Addresses to listen on.", dynamic=False),
    _b("advertised.listeners", STR, None, "Addresses given to clients; defaults to listeners.",
       dynamic=False),
    _b("node.id", INT, 0, "This broker's node id.", Range(0), dynamic=False),
    _b("broker.id", INT, None, "Older name of node.id; must match it when both are set.",
       dynamic=False),
    _b("socket.request.max.bytes", INT, 104_857_600, "Largest request size in bytes.", Range(1),
       dynamic=False),
    _b("fetch.max.bytes", INT, 57_671_680, "Largest Fetch response in bytes (smaller of this and the "
       "request's max_bytes; the first batch is still returned whole).", Range(0), dynamic=False),
    _b("offsets.retention.minutes", INT, 10_080, "Retention of committed offsets of empty groups.",
       Range(1), dynamic=False),
    _b("offsets.topic.num.partitions", INT, 50, "Partitions of __consumer_offsets.", Range(1),
       dynamic=False),
    _b("offsets.retention.check.interval.ms", LONG, 600_000,
       "Period in ms of the expired-offsets check.", Range(1), dynamic=False),
    _b("group.initial.rebalance.delay.ms", INT, 3000,
       "Delay in ms before the first rebalance of a new group.", dynamic=False),
    _b("group.min.session.timeout.ms", INT, 6000, "Smallest session timeout a member may ask.",
       dynamic=False),
    _b("group.max.session.timeout.ms", INT, 1_800_000, "Largest session timeout a member may ask.",
       dynamic=False),
    _b("group.max.size", INT, 2**31 - 1, "Most members a classic group may have (GROUP_MAX_SIZE_REACHED).",
       Range(1), dynamic=False),
    _b("offset.metadata.max.bytes", INT, 4096, "Largest metadata string of a committed offset.",
       dynamic=False),
    # KIP-848 consumer groups (kompakt.broker.groups.consumer_coordinator).
    _b("group.coordinator.rebalance.protocols", LIST, ("classic", "consumer", "streams"),
       "Enabled group protocols; without consumer, ConsumerGroupHeartbeat is refused (kompakt "
       "has no streams groups).", ValidList(("classic", "consumer", "streams")), dynamic=False),
    _b("group.consumer.session.timeout.ms", INT, 45_000,
       "Session timeout in ms of a consumer-protocol member.", Range(1), dynamic=False),
    _b("group.consumer.min.session.timeout.ms", INT, 45_000,
       "Smallest group.consumer.session.timeout.ms.", Range(1), dynamic=False),
    _b("group.consumer.max.session.timeout.ms", INT, 60_000,
       "Largest group.consumer.session.timeout.ms.", Range(1), dynamic=False),
    _b("group.consumer.heartbeat.interval.ms", INT, 5_000,
       "Heartbeat interval in ms given to consumer-protocol members.", Range(1), dynamic=False),
    _b("group.consumer.min.heartbeat.interval.ms", INT, 5_000,
       "Smallest group.consumer.heartbeat.interval.ms.", Range(1), dynamic=False),
    _b("group.consumer.max.heartbeat.interval.ms", INT, 15_000,
       "Largest group.consumer.heartbeat.interval.ms.", Range(1), dynamic=False),
    _b("group.consumer.max.size", INT, 2**31 - 1, "Most members of one consumer group.", Range(1),
       dynamic=False),
    _b("group.consumer.assignors", LIST, ("uniform", "range"),
       "Server assignors (names or Kafka class names); the first is the default.",
       ValidList(("uniform", "range", "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                  "org.apache.kafka.coordinator.group.assignor.RangeAssignor")), dynamic=False),
    _b("group.consumer.migration.policy", STR, "bidirectional",
       "Conversion between classic and consumer groups; kompakt converts empty groups only.",
       ValidString(("disabled", "upgrade", "downgrade", "bidirectional",
                    "DISABLED", "UPGRADE", "DOWNGRADE", "BIDIRECTIONAL")), dynamic=False),
    _b("log.dirs", STR, None, "Data directories (kompakt uses exactly one).", dynamic=False),
    _b("log.dir", STR, "/tmp/kafka-logs", "Data directory used when log.dirs is not set.",
       dynamic=False),
)  # fmt: skip

#: The broker configs kompakt defines (and acts on), with its own wording and validators.
KOMPAKT_BROKER_CONFIGS: dict[str, ConfigDef] = {
    d.name: d for d in (*_SYNONYM_BROKER_DEFS, *_BROKER_ONLY_DEFS)
}

#: Every other Kafka 4.1 broker config (:mod:`kompakt.log.kafka_configs`): accepted wherever Kafka
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
