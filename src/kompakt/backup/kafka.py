"""The few Kafka client calls backup and restore make, through confluent-kafka (librdkafka).

A backup must work against any Kafka-compatible cluster, so it uses a real Kafka client rather
than kompakt's own protocol code. This module turns the client's errors into one-line
:class:`BackupError` messages (an unreachable cluster is reported after ``timeout_s``, never a
hang) and keeps librdkafka's retry chatter out of the terminal unless debug logging is on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import confluent_kafka
import confluent_kafka.admin as _admin

from kompakt.backup.errors import BackupError

KAFKA_ADMIN: Any = _admin
KAFKA: Any = confluent_kafka
DYNAMIC_TOPIC_CONFIG = 1  # ConfigSource.DYNAMIC_TOPIC_CONFIG: a topic's own override


def _quiet_logger() -> logging.Logger:
    logger = logging.getLogger("kompakt.backup.librdkafka")
    debug = logging.getLogger().getEffectiveLevel() <= logging.DEBUG
    logger.disabled = not debug
    logger.propagate = debug
    return logger


class Client:
    """Connection settings shared by the admin client, consumers and producers of one run."""

    def __init__(self, bootstrap: str, timeout_s: float, extra: Mapping[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self.extra = dict(extra or {})
        self.errors: list[str] = []
        self._admin: Any = None

    def _on_error(self, error: Any) -> None:
        self.errors.append(str(error.str() if hasattr(error, "str") else error))
        del self.errors[:-5]

    def config(self, **more: Any) -> dict[str, Any]:
        timeout_ms = max(1000, int(self.timeout_s * 1000))
        return {
            "bootstrap.servers": self.bootstrap,
            "socket.connection.setup.timeout.ms": timeout_ms,
            "logger": _quiet_logger(),
            "error_cb": self._on_error,
            **self.extra,
            **more,
        }

    def fail(self, what: str, exc: BaseException | None = None) -> BackupError:
        """A one-line error: what failed, the client's reason and the last transport error."""
        if self._admin is not None:
            self._admin.poll(0)  # serve error_cb, so the line can say why (refused, DNS...)
        detail = ""
        if exc is not None:
            arg = exc.args[0] if exc.args else exc
            detail = str(arg.str()) if hasattr(arg, "str") else str(arg)
        if self.errors and self.errors[-1] not in detail:
            detail = f"{detail} ({self.errors[-1]})" if detail else self.errors[-1]
        return BackupError(f"{what} at {self.bootstrap}: {detail or 'timed out'}")

    @property
    def admin(self) -> Any:
        if self._admin is None:
            config = self.config()
            # librdkafka connects a sparse client's first broker from a timer: every run's first
            # request (the topic list) waited about 55 ms for it, a tenth of a 256 MB backup on
            # the development machine; connected at once it takes 2-5 ms. The admin client then
            # keeps a connection to each broker of the cluster, which the backup reads from anyway.
            config.setdefault("enable.sparse.connections", False)
            self._admin = KAFKA_ADMIN.AdminClient(config)
        return self._admin

    def result(self, future: Any, what: str) -> Any:
        try:
            return future.result(timeout=self.timeout_s * 2)
        except KAFKA.KafkaException as exc:
            raise self.fail(what, exc) from None
        except TimeoutError:
            raise self.fail(what) from None

    def topics(self) -> dict[str, int]:
        """Every topic and its partition count; the first call proves the cluster is reachable."""
        try:
            metadata = self.admin.list_topics(timeout=self.timeout_s)
        except KAFKA.KafkaException as exc:
            raise self.fail("cannot reach the cluster", exc) from None
        return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}

    def topic_configs(self, topics: list[str]) -> dict[str, tuple[dict[str, str], dict[str, str]]]:
        """Per topic: (its own overrides, every effective value)."""
        if not topics:
            return {}
        resources = [KAFKA_ADMIN.ConfigResource(KAFKA_ADMIN.ResourceType.TOPIC, t) for t in topics]
        futures = self.admin.describe_configs(resources, request_timeout=self.timeout_s)
        out: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
        for resource, future in futures.items():
            entries = self.result(future, f"cannot describe the configs of topic {resource.name!r}")
            overrides: dict[str, str] = {}
            effective: dict[str, str] = {}
            for name, entry in entries.items():
                if entry.value is None:
                    continue
                effective[name] = str(entry.value)
                if int(entry.source) == DYNAMIC_TOPIC_CONFIG and not entry.is_sensitive:
                    overrides[name] = str(entry.value)
            out[resource.name] = (overrides, effective)
        return out

    def watermarks(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        """Log start and high watermark of every partition: two ListOffsets round trips in all."""
        if not partitions:
            return {}
        found: dict[tuple[str, int], list[int]] = {tp: [0, 0] for tp in partitions}
        for slot, spec in ((0, KAFKA_ADMIN.OffsetSpec.earliest()), (1, KAFKA_ADMIN.OffsetSpec.latest())):
            request = {KAFKA.TopicPartition(t, p): spec for t, p in partitions}
            futures = self.admin.list_offsets(request, request_timeout=self.timeout_s)
            for tp, future in futures.items():
                info = self.result(future, f"cannot read the offsets of {tp.topic}-{tp.partition}")
                found[(tp.topic, tp.partition)][slot] = int(info.offset)
        return {tp: (low, high) for tp, (low, high) in found.items()}

    def group_offsets(self, topics: set[str]) -> dict[str, dict[str, dict[str, int]]]:
        """Committed offsets of every group, restricted to ``topics``: group -> topic -> partition."""
        listing = self.result(
            self.admin.list_consumer_groups(request_timeout=self.timeout_s), "cannot list groups"
        )
        out: dict[str, dict[str, dict[str, int]]] = {}
        for group in sorted(g.group_id for g in listing.valid):
            request = [KAFKA.ConsumerGroupTopicPartitions(group)]
            futures = self.admin.list_consumer_group_offsets(request, request_timeout=self.timeout_s)
            for _group, future in futures.items():
                result = self.result(future, f"cannot read the offsets of group {group!r}")
                for tp in result.topic_partitions or []:
                    if tp.topic in topics and tp.offset >= 0 and tp.error is None:
                        out.setdefault(group, {}).setdefault(tp.topic, {})[str(tp.partition)] = tp.offset
        return out
