"""Persistent topic metadata: ``<data-dir>/kompakt-topics.json``.

Kafka keeps topic ids, partition counts and config overrides in the cluster metadata log, not in
the log directory. kompakt has no controller, so it keeps them in one JSON file, replaced
atomically on every change (temp file, fsync, rename, fsync directory)::

    {
      "version": 1,
      "topics": [
        {"name": "orders", "topic_id": "<22-char Kafka id>", "partitions": 3,
         "configs": {"cleanup.policy": "compact"}},
        {"name": "old", "topic_id": "...", "partitions": 2, "configs": {}, "pending": "delete"}
      ]
    }

Only overrides are stored; the effective config is resolved against the broker config at load
time, so a broker default change reaches every topic without an override.

Creating, growing and deleting a topic change several files (this one and a directory per
partition), and no sequence of renames makes that atomic. Kafka gets atomicity from its metadata
log: once the controller has committed a TopicRecord, every broker creates the logs it is
missing, at start-up too. kompakt does the same with an intent in this file, written before any
directory is touched: ``"pending": "create"`` (the topic and its partition count are decided; any
partition directory still missing is created when the directory opens) or ``"pending": "delete"``
(the topic is gone; any partition directory still present is renamed ``-delete`` when the
directory opens). The intent is cleared when the change has finished. So after a crash at any
point a topic exists with all its partitions or not at all.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from kompakt.errors import InvalidTopicError, KompaktError
from kompakt.log.files import DEFAULT_FILE_OPS, FileOps, atomic_write_bytes
from kompakt.log.metadata_files import ZERO_UUID, kafka_to_uuid, uuid_to_kafka

TOPICS_FILE = "kompakt-topics.json"
TOPICS_FILE_VERSION = 1
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")


class CorruptTopicStoreError(KompaktError):
    """``kompakt-topics.json`` exists but cannot be read; the message names the file."""


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rules, with Kafka's messages."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        raise InvalidTopicError(
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"
        )


class PendingChange(StrEnum):
    """A change to a topic's partition directories that was decided but may not have finished."""

    #: Partitions ``0..partitions-1`` must all exist: missing ones are created at start-up.
    CREATE = "create"
    #: The topic is deleted: its partition directories still present are renamed ``-delete``.
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """What kompakt must remember about a topic beyond its partition directories."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    pending: PendingChange | None = None

    def with_pending(self, pending: PendingChange | None) -> TopicMetadata:
        return replace(self, configs=dict(self.configs), pending=pending)

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "name": self.name,
            "topic_id": uuid_to_kafka(self.topic_id),
            "partitions": self.partitions,
            "configs": dict(sorted(self.configs.items())),
        }
        if self.pending is not None:
            document["pending"] = self.pending.value
        return document

    @classmethod
    def from_json(cls, raw: Any) -> TopicMetadata:
        """Parse one topic object; raises ValueError/KeyError/TypeError on a bad shape."""
        name, partitions, configs = raw["name"], raw["partitions"], raw["configs"]
        if not isinstance(name, str) or not isinstance(partitions, int) or isinstance(partitions, bool):
            raise TypeError("name must be a string and partitions an integer")
        if partitions < 1:
            raise ValueError(f"topic {name} has {partitions} partitions")
        if not isinstance(configs, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in configs.items()
        ):
            raise TypeError(f"configs of topic {name} must map strings to strings")
        topic_id = kafka_to_uuid(raw["topic_id"])
        if topic_id == ZERO_UUID:
            raise ValueError(f"topic {name} has the zero topic id")
        pending = raw.get("pending")
        return cls(
            name=name,
            topic_id=topic_id,
            partitions=partitions,
            configs=dict(configs),
            pending=None if pending is None else PendingChange(pending),
        )


class TopicStore:
    """Loads and saves the topic metadata file of one data directory.

    Not thread-safe: the log manager serialises topic creation, deletion and config changes.
    """

    def __init__(self, data_dir: str | Path, file_ops: FileOps = DEFAULT_FILE_OPS) -> None:
        self.path = Path(data_dir) / TOPICS_FILE
        self._file_ops = file_ops

    def load(self) -> dict[str, TopicMetadata]:
        """Every topic by name; a missing file means no topics yet."""
        try:
            raw = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise CorruptTopicStoreError(
                f"Topic metadata file {self.path} is not valid JSON: {exc}"
            ) from None
        try:
            if raw["version"] != TOPICS_FILE_VERSION:
                raise ValueError(f"unsupported version {raw['version']!r}")
            topics = [TopicMetadata.from_json(entry) for entry in raw["topics"]]
            for topic in topics:
                validate_topic_name(topic.name)
        except (KeyError, TypeError, ValueError, InvalidTopicError) as exc:
            raise CorruptTopicStoreError(f"Topic metadata file {self.path} is corrupt: {exc!r}") from None
        result = {topic.name: topic for topic in topics}
        if len(result) != len(topics):
            raise CorruptTopicStoreError(f"Topic metadata file {self.path} lists a topic twice")
        return result

    def save(self, topics: Mapping[str, TopicMetadata]) -> None:
        """Replace the file atomically: a crash leaves either the old or the new set."""
        document = {
            "version": TOPICS_FILE_VERSION,
            "topics": [topics[name].to_json() for name in sorted(topics)],
        }
        atomic_write_bytes(self.path, (json.dumps(document, indent=2) + "\n").encode(), self._file_ops)
