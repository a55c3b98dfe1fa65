"""The group coordinator's configs, as Kafka 4.1 keeps them together in ``GroupCoordinatorConfig``
(the broker's ``group.*`` and ``offsets.*`` configs, and the rules between them) and ``GroupConfig``
(the configs of one group, set as a GROUP config resource: ``consumer.session.timeout.ms`` and the
like, KIP-848).

The typed views the coordinator runs with, ``kompakt.broker.groups.config.GroupConfig`` and
``ConsumerGroupConfig``, are built from these definitions by their ``from_broker``; a default is
declared here and nowhere else. Every rule is checked when the broker config is built (so a bad
``server.properties`` is refused before the data directory is opened) and raises
:class:`~kompakt.errors.ConfigError`.

kompakt has classic and consumer groups only: the ``group.share.*`` and ``group.streams.*`` broker
configs are Kafka's, accepted and inert (:mod:`kompakt.config.kafka`), and the ``share.*`` and
``streams.*`` group configs are accepted, validated against them as Kafka does, stored and
described, and otherwise without effect.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from kompakt.config.defs import (
    INT,
    INT_MAX,
    LIST,
    LONG,
    STR,
    ConfigDef,
    ConfigValue,
    Lookup,
    Range,
    ValidList,
    ValidString,
    define,
    invalid,
)
from kompakt.errors import ConfigError, InvalidConfigurationError

#: ``group.consumer.migration.policy`` values (Kafka's ``ConsumerGroupMigrationPolicy``).
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")

GROUP_BROKER_DEFS: tuple[ConfigDef, ...] = (
    define("offsets.retention.minutes", INT, 10_080, "Retention of committed offsets of empty groups.",
           Range(1), dynamic=False),
    define("offsets.topic.num.partitions", INT, 50, "Partitions of __consumer_offsets.", Range(1),
           dynamic=False),
    define("offsets.retention.check.interval.ms", LONG, 600_000,
           "Period in ms of the expired-offsets check.", Range(1), dynamic=False),
    define("group.initial.rebalance.delay.ms", INT, 3000,
           "Delay in ms before the first rebalance of a new group.", dynamic=False),
    define("group.min.session.timeout.ms", INT, 6000, "Smallest session timeout a member may ask.",
           dynamic=False),
    define("group.max.session.timeout.ms", INT, 1_800_000, "Largest session timeout a member may ask.",
           dynamic=False),
    define("group.max.size", INT, INT_MAX, "Most members a classic group may have (GROUP_MAX_SIZE_REACHED).",
           Range(1), dynamic=False),
    define("offset.metadata.max.bytes", INT, 4096, "Largest metadata string of a committed offset.",
           dynamic=False),
    # KIP-848 consumer groups (kompakt.broker.groups.consumer).
    define("group.coordinator.rebalance.protocols", LIST, ("classic", "consumer", "streams"),
           "Enabled group protocols; without consumer, ConsumerGroupHeartbeat is refused (kompakt "
           "has no streams groups).", ValidList(("classic", "consumer", "streams")), dynamic=False),
    define("group.consumer.session.timeout.ms", INT, 45_000,
           "Session timeout in ms of a consumer-protocol member; a group's consumer.session.timeout.ms "
           "overrides it.", Range(1), dynamic=False),
    define("group.consumer.min.session.timeout.ms", INT, 45_000,
           "Smallest group.consumer.session.timeout.ms.", Range(1), dynamic=False),
    define("group.consumer.max.session.timeout.ms", INT, 60_000,
           "Largest group.consumer.session.timeout.ms.", Range(1), dynamic=False),
    define("group.consumer.heartbeat.interval.ms", INT, 5_000,
           "Heartbeat interval in ms given to consumer-protocol members; a group's "
           "consumer.heartbeat.interval.ms overrides it.", Range(1), dynamic=False),
    define("group.consumer.min.heartbeat.interval.ms", INT, 5_000,
           "Smallest group.consumer.heartbeat.interval.ms.", Range(1), dynamic=False),
    define("group.consumer.max.heartbeat.interval.ms", INT, 15_000,
           "Largest group.consumer.heartbeat.interval.ms.", Range(1), dynamic=False),
    define("group.consumer.max.size", INT, INT_MAX, "Most members of one consumer group.", Range(1),
           dynamic=False),
    define("group.consumer.assignors", LIST, ("uniform", "range"),
           "Server assignors (names or Kafka class names); the first is the default.",
           ValidList(("uniform", "range", "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                      "org.apache.kafka.coordinator.group.assignor.RangeAssignor")), dynamic=False),
    define("group.consumer.migration.policy", STR, "bidirectional",
           "Conversion between classic and consumer groups; kompakt converts empty groups only.",
           ValidString(("disabled", "upgrade", "downgrade", "bidirectional",
                        "DISABLED", "UPGRADE", "DOWNGRADE", "BIDIRECTIONAL")), dynamic=False),
)  # fmt: skip


# ----------------------------------------------------------------------------------------------
# The broker-level rules (Kafka's GroupCoordinatorConfig and ShareGroupConfig constructors)


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def check_classic_rules(
    *,
    min_session_timeout_ms: int,
    max_session_timeout_ms: int,
    initial_rebalance_delay_ms: int,
    max_size: int,
) -> None:
    """The classic coordinator's bounds: a member's session timeout must fit between them."""
    _require(
        0 <= min_session_timeout_ms <= max_session_timeout_ms,
        "group.min.session.timeout.ms must be within 0..group.max.session.timeout.ms",
    )
    _require(initial_rebalance_delay_ms >= 0, "group.initial.rebalance.delay.ms must not be negative")
    _require(max_size >= 1, "group.max.size must be at least 1")


def check_timeouts(
    prefix: str,
    *,
    session_timeout_ms: int,
    min_session_timeout_ms: int,
    max_session_timeout_ms: int,
    heartbeat_interval_ms: int,
    min_heartbeat_interval_ms: int,
    max_heartbeat_interval_ms: int,
) -> None:
    """Kafka's seven rules between a group type's session timeout and heartbeat interval and their
    bounds, in Kafka's order and wording; ``prefix`` is ``group.consumer`` (or share, streams)."""
    session, heartbeat = f"{prefix}.session.timeout.ms", f"{prefix}.heartbeat.interval.ms"
    min_session, max_session = f"{prefix}.min.session.timeout.ms", f"{prefix}.max.session.timeout.ms"
    min_hb, max_hb = f"{prefix}.min.heartbeat.interval.ms", f"{prefix}.max.heartbeat.interval.ms"
    ge, le = "must be greater than or equal to", "must be less than or equal to"
    _require(max_heartbeat_interval_ms >= min_heartbeat_interval_ms, f"{max_hb} {ge} {min_hb}")
    _require(heartbeat_interval_ms >= min_heartbeat_interval_ms, f"{heartbeat} {ge} {min_hb}")
    _require(heartbeat_interval_ms <= max_heartbeat_interval_ms, f"{heartbeat} {le} {max_hb}")
    _require(max_session_timeout_ms >= min_session_timeout_ms, f"{max_session} {ge} {min_session}")
    _require(session_timeout_ms >= min_session_timeout_ms, f"{session} {ge} {min_session}")
    _require(session_timeout_ms <= max_session_timeout_ms, f"{session} {le} {max_session}")
    _require(heartbeat_interval_ms < session_timeout_ms, f"{heartbeat} must be less than {session}")


def check_consumer_rules(
    *,
    session_timeout_ms: int,
    min_session_timeout_ms: int,
    max_session_timeout_ms: int,
    heartbeat_interval_ms: int,
    min_heartbeat_interval_ms: int,
    max_heartbeat_interval_ms: int,
    max_size: int,
    assignors: tuple[str, ...],
    migration_policy: str,
) -> None:
    """The ``group.consumer.*`` rules: Kafka's timeouts, and what kompakt's coordinator needs."""
    check_timeouts(
        "group.consumer",
        session_timeout_ms=session_timeout_ms,
        min_session_timeout_ms=min_session_timeout_ms,
        max_session_timeout_ms=max_session_timeout_ms,
        heartbeat_interval_ms=heartbeat_interval_ms,
        min_heartbeat_interval_ms=min_heartbeat_interval_ms,
        max_heartbeat_interval_ms=max_heartbeat_interval_ms,
    )
    _require(max_size >= 1, "group.consumer.max.size must be at least 1")
    _require(bool(assignors), "group.consumer.assignors must name at least one assignor")
    _require(
        migration_policy in MIGRATION_POLICIES,
        f"group.consumer.migration.policy must be one of {', '.join(MIGRATION_POLICIES)}",
    )


def _timeouts_of(config: Lookup, prefix: str) -> dict[str, int]:
    return {
        f"{bound}{kind}": config.get_int(f"{prefix}.{bound.replace('_', '.')}{kind.replace('_', '.')}")
        for bound in ("", "min_", "max_")
        for kind in ("session_timeout_ms", "heartbeat_interval_ms")
    }


def check_group_rules(config: Lookup) -> None:
    """Every rule between the broker's group configs, as Kafka checks them at start-up: the
    classic bounds, the consumer, share and streams timeouts, and the share and streams limits
    (those two group types are inert in kompakt, but a group's ``share.*`` and ``streams.*``
    configs are validated against these bounds, so they must make sense)."""
    check_classic_rules(
        min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
        max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
        initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
        max_size=config.get_int("group.max.size"),
    )
    check_consumer_rules(
        **_timeouts_of(config, "group.consumer"),
        max_size=config.get_int("group.consumer.max.size"),
        assignors=config.get_list("group.consumer.assignors"),
        migration_policy=(config.get_str("group.consumer.migration.policy") or "").lower(),
    )
    check_timeouts("group.share", **_timeouts_of(config, "group.share"))
    shares = len(config.get_list("group.share.assignors"))
    _require(shares == 1, f"group.share.assignors must contain exactly one assignor, but found {shares}")
    check_timeouts("group.streams", **_timeouts_of(config, "group.streams"))
    _require(
        config.get_int("group.streams.num.standby.replicas")
        <= config.get_int("group.streams.max.standby.replicas"),
        "group.streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas",
    )
    lock, min_lock, max_lock = (
        config.get_int(f"group.share.{bound}record.lock.duration.ms") for bound in ("", "min.", "max.")
    )
    _require(
        lock >= min_lock,
        "group.share.record.lock.duration.ms must be greater than or equal to "
        "group.share.min.record.lock.duration.ms",
    )
    _require(
        max_lock >= lock,
        "group.share.max.record.lock.duration.ms must be greater than or equal to "
        "group.share.record.lock.duration.ms",
    )
    _require(
        config.get_int("group.share.max.share.sessions") >= config.get_int("group.share.max.size"),
        "group.share.max.share.sessions must be greater than or equal to group.share.max.size",
    )


# ----------------------------------------------------------------------------------------------
# The configs of one group (Kafka's GroupConfig): a GROUP config resource

_JAVA_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)


def _java_duration_seconds(text: str) -> Decimal | None:
    """Java's ``Duration.parse`` (``PnDTnHnMn.nS``): the duration in seconds, None if malformed."""
    match = _JAVA_DURATION.fullmatch(text)
    if match is None:
        return None
    sign, days, time_part, hours, minutes, seconds, fraction = match.groups()
    if days is None and time_part is None:
        return None
    if time_part is not None and hours is None and minutes is None and seconds is None:
        return None
    total = Decimal(int(days or 0) * 86_400 + int(hours or 0) * 3_600 + int(minutes or 0) * 60)
    if seconds is not None:
        whole = Decimal(int(seconds))
        part = Decimal(f"0.{fraction}") if fraction else Decimal(0)
        total += whole - part if seconds.startswith("-") else whole + part
    return -total if sign == "-" else total


@dataclass(frozen=True, slots=True)
class ShareAutoOffsetReset:
    """Kafka's ``ShareGroupAutoOffsetResetStrategy.Validator``: ``earliest``, ``latest`` or
    ``by_duration:<ISO-8601 duration>``, the duration not negative."""

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if not isinstance(value, str) or value in ("earliest", "latest"):
            return
        prefix = "by_duration:"
        if value.startswith(prefix):
            seconds = _java_duration_seconds(value[len(prefix) :])
            if seconds is not None and seconds >= 0:
                return
        raise invalid(
            name,
            value,
            f"Invalid value `{value}` for configuration {name}. The value must be either 'earliest', "
            "'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
        )


_INERT_SHARE = "[not acted on: kompakt has no share groups] "
_INERT_STREAMS = "[not acted on: kompakt has no streams groups] "

#: Kafka 4.1's group configs, with Kafka's types, static defaults and validators.
GROUP_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    define("consumer.session.timeout.ms", INT, 45_000,
           "Session timeout in ms of this consumer group's members; overrides the broker's "
           "group.consumer.session.timeout.ms, within group.consumer.min/max.session.timeout.ms.",
           Range(1)),
    define("consumer.heartbeat.interval.ms", INT, 5_000,
           "Heartbeat interval in ms given to this consumer group's members; overrides the broker's "
           "group.consumer.heartbeat.interval.ms, within group.consumer.min/max.heartbeat.interval.ms.",
           Range(1)),
    define("share.session.timeout.ms", INT, 45_000,
           _INERT_SHARE + "Session timeout in ms of this share group's members.", Range(1)),
    define("share.heartbeat.interval.ms", INT, 5_000,
           _INERT_SHARE + "Heartbeat interval in ms given to this share group's members.", Range(1)),
    define("share.record.lock.duration.ms", INT, 30_000,
           _INERT_SHARE + "How long in ms a share consumer holds a record it was given.", Range(1000)),
    define("share.auto.offset.reset", STR, "latest",
           _INERT_SHARE + "Where a share partition starts: earliest, latest or by_duration:<PnDTnHnMn.nS>.",
           ShareAutoOffsetReset()),
    define("share.isolation.level", STR, "read_uncommitted",
           _INERT_SHARE + "Whether a share group delivers only committed transactional records.",
           ValidString(("read_committed", "read_uncommitted"))),
    define("streams.session.timeout.ms", INT, 45_000,
           _INERT_STREAMS + "Session timeout in ms of this streams group's members.", Range(1)),
    define("streams.heartbeat.interval.ms", INT, 5_000,
           _INERT_STREAMS + "Heartbeat interval in ms given to this streams group's members.", Range(1)),
    define("streams.num.standby.replicas", INT, 0,
           _INERT_STREAMS + "Standby replicas of each task of this streams group.", Range(0)),
)  # fmt: skip

GROUP_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in GROUP_CONFIG_DEFS}

#: The group configs whose default is the broker's config of the same meaning (Kafka's
#: ``extractGroupConfigMap``): what DescribeConfigs shows and the coordinator runs with.
GROUP_DEFAULT_FROM_BROKER: dict[str, str] = {
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
    "share.session.timeout.ms": "group.share.session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.heartbeat.interval.ms",
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
}
#: The ones validation starts from (Kafka's ``extractConsumerGroupConfigMap``: only the consumer
#: two; a share or streams config not set is checked at its static default).
_VALIDATION_DEFAULT_FROM_BROKER = ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms")


def group_config_values(overrides: Mapping[str, str], broker: Lookup) -> dict[str, ConfigValue]:
    """Every group config of a group with ``overrides``: its own value, else the broker's, else
    the static default (Kafka's ``GroupConfig.fromProps(extractGroupConfigMap, props)``)."""
    values: dict[str, ConfigValue] = {d.name: d.default for d in GROUP_CONFIG_DEFS}
    values.update(
        {name: broker.get_int(broker_name) for name, broker_name in GROUP_DEFAULT_FROM_BROKER.items()}
    )
    values.update({name: GROUP_CONFIGS[name].parse(raw) for name, raw in overrides.items()})
    return values


def validate_group_config(overrides: Mapping[str, str], broker: Lookup) -> None:
    """Kafka's ``GroupConfigManager.validate``: known names, values that parse and pass their
    validator, then the rules against the broker's bounds. Raises :class:`ConfigError`."""
    for name in overrides:
        if name not in GROUP_CONFIGS:
            raise InvalidConfigurationError(f"Unknown group config name: {name}")
    values: dict[str, ConfigValue] = {d.name: d.default for d in GROUP_CONFIG_DEFS}
    for name in _VALIDATION_DEFAULT_FROM_BROKER:
        values[name] = broker.get_int(GROUP_DEFAULT_FROM_BROKER[name])
    values.update({name: GROUP_CONFIGS[name].parse(raw) for name, raw in overrides.items()})
    _check_group_values({k: v for k, v in values.items() if isinstance(v, int)}, broker)


def _check_group_values(values: Mapping[str, int], broker: Lookup) -> None:
    """Kafka's ``GroupConfig.validateValues``, in its order and wording."""
    for kind in ("consumer", "share", "streams"):
        for setting in ("heartbeat.interval.ms", "session.timeout.ms"):
            value = values[f"{kind}.{setting}"]
            for bound, holds, words in (("min", value.__ge__, "greater"), ("max", value.__le__, "less")):
                limit = f"group.{kind}.{bound}.{setting}"
                if not holds(broker.get_int(limit)):
                    raise InvalidConfigurationError(
                        f"{kind}.{setting} must be {words} than or equal to {limit}"
                    )
        if kind == "share":
            lock = values["share.record.lock.duration.ms"]
            for bound, holds, words in (("min", lock.__ge__, "greater"), ("max", lock.__le__, "less")):
                limit = f"group.share.{bound}.record.lock.duration.ms"
                if not holds(broker.get_int(limit)):
                    raise InvalidConfigurationError(
                        f"share.record.lock.duration.ms must be {words} than or equal to {limit}"
                    )
    if values["streams.num.standby.replicas"] > broker.get_int("group.streams.max.standby.replicas"):
        raise InvalidConfigurationError(
            "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"
        )
    for kind in ("consumer", "share", "streams"):
        if values[f"{kind}.session.timeout.ms"] <= values[f"{kind}.heartbeat.interval.ms"]:
            raise InvalidConfigurationError(
                f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms"
            )
