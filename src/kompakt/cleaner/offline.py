"""Offline compaction of a stopped data directory (kompakt's or a real Kafka broker's).

The directory is opened through the :class:`LogManager`, which takes its ``.lock`` file, so a
directory held by a running broker is refused rather than rewritten underneath it. Every
compacted partition is compacted from its log start offset up to its uncleanable boundary with
the same :class:`Cleaner` as the broker's threads, the cleaner checkpoint is advanced, and the
directory is closed cleanly so Kafka or kompakt opens it without recovery.

Tombstones held for the readers named in ``kompakt.tombstone.retain.for.groups`` stay held: the
directory's group offsets are not read, so the named groups count as having read nothing, up to
``kompakt.tombstone.max.hold.ms`` (:class:`~kompakt.cleaner.readers.AssumeUnread`).

Kafka 4 keeps topic configs in its metadata log, the ``__cluster_metadata-0`` partition of the
same directory (:mod:`kompakt.log.cluster_metadata`): each topic is compacted with its own overrides
from there, the broker-level ones (the cluster default, then this node's own) under them, and
``config_overrides`` (the command's ``--config``) over everything. The metadata log itself is
KRaft's, not a topic: it is never opened (:class:`LogManager` skips it, as Kafka's does), and a
partition directory the metadata log does not assign to this node is left alone (Kafka renames it
``-stray`` at its next start). Without a metadata log (a kompakt directory, an older Kafka
directory) the stored configs apply, and for a Kafka directory the caller supplies the rest.

A broker deletes the segments a clean retires (``*.deleted``) ``file.delete.delay.ms`` later, so
that readers still holding them can finish. Nothing reads a stopped directory, so the offline run
deletes them as soon as the directory is closed, together with the producer-state snapshots
(``<offset>.snapshot``, written by Kafka) of segments the clean merged away; the snapshots Kafka's
``LogLoader`` still reads (at a surviving segment's base, or at the log end) are kept. Each
partition reports the bytes its directory shrank by, so the numbers match ``du``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kompakt.cleaner.cleaner import Cleaner, CleanResult
from kompakt.cleaner.compact_now import compact_log
from kompakt.cleaner.log_cleaner import CleanerSettings
from kompakt.cleaner.manager import CleanerCheckpointFile
from kompakt.cleaner.offset_map import HashedOffsetMap
from kompakt.cleaner.readers import AssumeUnread, ReaderPositions
from kompakt.cleaner.stats import combine_passes
from kompakt.clock import Clock
from kompakt.config.broker import BrokerConfig
from kompakt.config.tables import KOMPAKT_BROKER_CONFIGS
from kompakt.errors import LogDirectoryError
from kompakt.log.checkpoint import CLEANER_OFFSET_CHECKPOINT_FILE
from kompakt.log.cluster_metadata import ClusterMetadata, read_cluster_metadata
from kompakt.log.config import LogConfig
from kompakt.log.files import parse_partition_dir_name, partition_dir_name, segment_file_name
from kompakt.log.manager import LogManager
from kompakt.log.partition_log import PartitionLog

logger = logging.getLogger(__name__)

#: The name :func:`kompakt.log.segments.delete_later` gives the deletion of retired segments.
_DELETE_FILE_TASK = "delete-file "


class _OfflineScheduler:
    """The offline run's scheduler: nothing runs by itself, as with a broker that never starts.

    The deletions of retired segments (``*.deleted``) are kept and run by :meth:`delete_retired`
    once the directory is closed. Any other task (the removal of a ``-delete`` directory a
    deleted topic left, a flush) is dropped as before: the next broker start does it.
    """

    def __init__(self) -> None:
        self._retired: list[Callable[[], None]] = []

    def schedule(self, delay_ms: int, fn: Callable[[], None], name: str = "") -> None:
        if name.startswith(_DELETE_FILE_TASK):
            self._retired.append(fn)

    def delete_retired(self) -> None:
        retired, self._retired = self._retired, []
        for delete in retired:
            delete()


@dataclass(frozen=True, slots=True)
class PartitionCompaction:
    """What offline compaction did to one partition."""

    topic: str
    partition: int
    bytes_before: int
    bytes_after: int
    records_read: int
    records_written: int
    tombstones_removed: int
    passes: int
    seconds: float
    end_offset: int
    #: How many bytes smaller the partition directory is on disk than before the run (file sizes).
    bytes_reclaimed: int = 0
    markers_removed: int = 0
    aborted_records_removed: int = 0
    invalid_records: int = 0


def resolve_data_dir(path: Path) -> tuple[Path, tuple[str, int] | None]:
    """A data directory, or a partition directory inside one (then also its topic-partition)."""
    path = path.resolve()
    if not path.is_dir():
        raise LogDirectoryError(f"{path} is not a directory")
    if any(p.suffix == ".log" for p in path.iterdir()):
        try:
            return path.parent, parse_partition_dir_name(path.name)
        except LogDirectoryError:
            raise LogDirectoryError(f"{path} holds .log files but is not named <topic>-<partition>") from None
    return path, None


def compact_directory(
    path: Path,
    *,
    clock: Clock,
    broker_config: BrokerConfig | None = None,
    config_overrides: Mapping[str, str] | None = None,
    on_partition: Callable[[PartitionLog], None] | None = None,
    on_pass: Callable[[PartitionLog, CleanResult], None] | None = None,
    readers: ReaderPositions | None = None,
    cluster_metadata: ClusterMetadata | None = None,
    huge_pages: bool = False,
) -> list[PartitionCompaction]:
    """Compact every compacted partition under ``path`` (or just the partition ``path`` names).

    A stopped directory cannot tell where consumer groups are, so by default (``readers`` None)
    every group named in ``kompakt.tombstone.retain.for.groups`` is taken to have read nothing
    (:class:`AssumeUnread`): its tombstones stay until ``kompakt.tombstone.max.hold.ms`` past their
    horizon, never removed early. Pass :class:`NoReaders` to remove them as Kafka would.

    ``cluster_metadata`` is the directory's metadata log when the caller has read it already;
    otherwise it is read here. Without ``broker_config`` the broker-level overrides of the
    metadata log apply (on Kafka's defaults).

    ``huge_pages``: the cleaner's map and buffers in 2 MiB pages, as a broker's cleaner threads
    keep them. Off by default: an offline run touches them once, and fresh 2 MiB pages cost more
    to fault in than they save (:mod:`kompakt.records.memory`)."""
    data_dir, only = resolve_data_dir(path)
    metadata = cluster_metadata if cluster_metadata is not None else read_cluster_metadata(data_dir)
    if broker_config is None and metadata is not None:
        overrides = {k: v for k, (v, _) in metadata.broker_overrides().items() if k in KOMPAKT_BROKER_CONFIGS}
        broker_config = BrokerConfig.from_properties(overrides)
    broker = broker_config or BrokerConfig.from_properties({})
    disk_before = {p.name: _dir_bytes(p) for p in data_dir.iterdir() if p.is_dir()}
    scheduler = _OfflineScheduler()
    manager = LogManager(data_dir, broker, clock, scheduler=scheduler)
    manager.open()
    results: list[PartitionCompaction] = []
    merged_away: dict[Path, set[int]] = {}
    try:
        settings = CleanerSettings.from_broker(broker)
        cleaner = Cleaner(
            0,
            HashedOffsetMap(
                settings.dedupe_buffer_size // max(settings.threads, 1),
                settings.load_factor,
                huge_pages=huge_pages,
            ),
            clock,
            producer_id_expiration_ms=settings.producer_id_expiration_ms,
            readers=AssumeUnread() if readers is None else readers,
            huge_pages=huge_pages,
        )
        checkpoints = CleanerCheckpointFile(data_dir / CLEANER_OFFSET_CHECKPOINT_FILE, clock.now_ms)
        offsets = checkpoints.read()
        for tp, log in sorted(manager.logs().items()):
            if only is not None and tp != only:
                continue
            from_metadata: dict[str, str] = {}
            if metadata is not None:
                stray = metadata.stray_reason_of(log.directory, tp[0], tp[1])
                if stray is not None:
                    logger.warning("Not compacting %s: not in the metadata log (%s)", log.name, stray)
                    continue
                from_metadata = metadata.topic_overrides(tp[0])
            if config_overrides or from_metadata:
                stored = manager.topics().get(tp[0])
                merged = {**(stored.configs if stored else {}), **from_metadata, **(config_overrides or {})}
                log.update_config(LogConfig.from_overrides(merged, broker))
            if not log.config.compact:
                continue
            if on_partition is not None:
                on_partition(log)
            bases_before = _segment_bases(log)
            results.append(_compact_one(cleaner, log, offsets, on_pass))
            merged_away[log.directory] = bases_before - _segment_bases(log)
            checkpoints.write(offsets)
        if only is not None and only not in manager.logs():
            raise LogDirectoryError(f"partition {only[0]}-{only[1]} is not in {data_dir}")
    finally:
        manager.close()
        # After close: every segment's files are released, so the retired ones can go now.
        scheduler.delete_retired()
        for directory, bases in merged_away.items():
            _delete_snapshots(directory, bases)
    return [_with_reclaimed(r, data_dir, disk_before) for r in results]


def _segment_bases(log: PartitionLog) -> set[int]:
    with log.lock:
        return {s.base_offset for s in log.segments.values()}


def _delete_snapshots(directory: Path, merged_away: Iterable[int]) -> None:
    """Delete the producer-state snapshots at the base offsets of merged-away segments.

    Kafka's ``ProducerStateManager.removeStraySnapshots`` would delete them on its next start (a
    snapshot at an offset that is no segment's base, below the last segment's); the broker path
    of Kafka, ``UnifiedLog.replaceSegments``, deletes them with the segments. Every other snapshot
    is left alone.
    """
    for base in sorted(merged_away):
        snapshot = directory / segment_file_name(base, "snapshot")
        try:
            snapshot.unlink()
        except FileNotFoundError:
            continue
        logger.info("Deleted the producer-state snapshot %s of a merged-away segment", snapshot)


def _dir_bytes(directory: Path) -> int:
    """The sizes of the regular files directly in ``directory`` (a partition directory is flat)."""
    total = 0
    for entry in directory.iterdir():
        try:
            if entry.is_file():
                total += entry.stat().st_size
        except FileNotFoundError:
            continue
    return total


def _with_reclaimed(
    result: PartitionCompaction, data_dir: Path, disk_before: Mapping[str, int]
) -> PartitionCompaction:
    name = partition_dir_name(result.topic, result.partition)
    before = disk_before.get(name)
    if before is None:
        return result
    return dataclasses.replace(result, bytes_reclaimed=before - _dir_bytes(data_dir / name))


def _compact_one(
    cleaner: Cleaner,
    log: PartitionLog,
    offsets: dict[tuple[str, int], int],
    on_pass: Callable[[PartitionLog, CleanResult], None] | None,
) -> PartitionCompaction:
    started = time.monotonic()
    before = log.size_bytes
    passes = compact_log(
        cleaner,
        log,
        log.log_start_offset,
        on_pass=None if on_pass is None else (lambda result: on_pass(log, result)),
    )
    end = passes[-1].end_offset if passes else offsets.get((log.topic, log.partition), log.log_start_offset)
    offsets[(log.topic, log.partition)] = end
    # Later passes read again what earlier ones wrote: combined, not summed (combine_passes).
    stats = combine_passes([p.stats for p in passes]) if passes else None
    return PartitionCompaction(
        topic=log.topic,
        partition=log.partition,
        bytes_before=before,
        bytes_after=log.size_bytes,
        records_read=stats.messages_read if stats else 0,
        records_written=stats.messages_written if stats else 0,
        tombstones_removed=stats.tombstones_removed if stats else 0,
        passes=len(passes),
        seconds=time.monotonic() - started,
        end_offset=end,
        markers_removed=stats.markers_removed if stats else 0,
        aborted_records_removed=stats.aborted_records_removed if stats else 0,
        invalid_records=stats.invalid_messages_read if stats else 0,
    )
