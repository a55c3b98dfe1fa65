"""A kompakt backup read as a table (for ``kompakt table diff``): one table per partition.

Every file is checked against its sha256 in the manifest before a record is used, as a restore
checks it (:class:`~kompakt.backup.reader.RestoreSource`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

from kompakt.backup.config import RestoreConfig, StorageConfig
from kompakt.backup.errors import BackupError
from kompakt.backup.manifest import PartitionEntry
from kompakt.backup.reader import RestoreSource
from kompakt.backup.storage import Storage
from kompakt.table.blobs import BlobTable


def backup_tables(storage: Storage, backup_id: str, topic: str) -> list[BlobTable]:
    """The tables of ``topic``'s partitions in backup ``backup_id`` (an incomplete backup too)."""
    config = RestoreConfig(
        backup_id=backup_id, storage=StorageConfig(), topics=(topic,), allow_incomplete=True
    )
    source = RestoreSource.open(config, storage)
    entries = source.partitions(topic)
    if not entries:
        raise BackupError(f"backup {backup_id!r} holds no partition of topic {topic!r}")

    def files(entry: PartitionEntry) -> Iterator[bytes]:
        for _file, data, _batches in source.iter_batches(entry):
            yield data

    return [
        BlobTable(topic, e.partition, functools.partial(files, e), log_start_offset=e.log_start_offset)
        for e in entries
    ]
