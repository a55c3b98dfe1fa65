"""Reading a backup for a restore: which partitions, and their verified batches in offset order.

Both restore paths (protocol and offline) and the dry run share this, so they check the same
things the same way: the manifest is complete (unless ``allow_incomplete``), the requested topics
are in it, and every file matches its sha256 before any record is used.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass

from kompakt.backup.batches import backup_compressed, original
from kompakt.backup.config import RestoreConfig
from kompakt.backup.erasure import RecordFilter
from kompakt.backup.errors import BackupError, CorruptBackupError
from kompakt.backup.manifest import (
    STATUS_COMPLETE,
    FileEntry,
    Manifest,
    PartitionEntry,
    TopicEntry,
    load_manifest,
)
from kompakt.backup.segment import StreamCheck, verify_segment
from kompakt.backup.storage import Storage
from kompakt.errors import KompaktError
from kompakt.records.batch import RecordBatchView

VERIFY_THREADS = 4
"""Files checked at once before a restore (I/O, sha256 and CRC-32C run outside the GIL)."""
ORIGINAL_THREADS = 2
"""Threads that give back the batches the backup compressed (:func:`as_restored`)."""
ORIGINALS_AHEAD = 16 * 1024 * 1024
"""Stored bytes handed to those threads ahead of the batch the restore is writing."""


def policy_set(policy: str) -> frozenset[str]:
    """``cleanup.policy`` as a set ("compact,delete" == "delete, compact")."""
    return frozenset(p.strip().lower() for p in policy.split(",") if p.strip())


@dataclass
class RestoreSource:
    """The backup side of a restore: the manifest, the chosen topics and the filters."""

    storage: Storage
    manifest: Manifest
    topics: list[TopicEntry]
    record_filter: RecordFilter
    source_partitions: frozenset[int] | None = None

    @classmethod
    def open(cls, config: RestoreConfig, storage: Storage | None = None) -> RestoreSource:
        store = storage if storage is not None else config.storage.open()
        manifest = load_manifest(store, config.backup_id)
        if manifest.status != STATUS_COMPLETE and not config.allow_incomplete:
            last = manifest.runs[-1] if manifest.runs else None
            why = f" (run {last.run} {last.status}: {last.error})" if last and last.error else ""
            raise BackupError(
                f"backup {config.backup_id!r} is incomplete{why}; re-run the backup to finish it, "
                "or set restore.allow_incomplete: true to restore what it holds"
            )
        if config.topics:
            missing = [t for t in config.topics if t not in manifest.topics]
            if missing:
                raise BackupError(
                    f"topic(s) {', '.join(map(repr, missing))} are not in backup {config.backup_id!r}"
                )
            topics = [manifest.topics[t] for t in config.topics]
        else:
            topics = [manifest.topics[t] for t in sorted(manifest.topics)]
        if config.topic_selection is not None:
            topics = [t for t in topics if config.topic_selection.matches(t.name)]
            if not topics:
                raise BackupError(f"no topic of backup {config.backup_id!r} matches target.topics")
        unknown = [t for t in config.topic_mapping if t not in manifest.topics]
        if unknown:
            raise BackupError(f"restore.topic_mapping names topic(s) not in the backup: {', '.join(unknown)}")
        record_filter = RecordFilter(config.time_window_start, config.time_window_end, config.erasure)
        return cls(store, manifest, topics, record_filter, config.source_partitions)

    def partitions(self, topic: str) -> list[PartitionEntry]:
        """The topic's partitions to restore (all, or those of ``restore.source_partitions``)."""
        return [
            p
            for (t, number), p in sorted(self.manifest.partitions.items())
            if t == topic and (self.source_partitions is None or number in self.source_partitions)
        ]

    def files(self, entry: PartitionEntry) -> list[FileEntry]:
        """The partition's files in offset order, without those wholly outside the time window."""
        return [
            f
            for f in sorted(entry.files, key=lambda f: f.first_offset)
            if not self.record_filter.skips_file(f.min_timestamp, f.max_timestamp)
        ]

    def read_file(self, entry: FileEntry, *, checksum: bool = True) -> tuple[bytes, list[RecordBatchView]]:
        """The file's bytes and batches, checked against its entry (see :func:`verify_segment`);
        ``checksum=False`` leaves out the sha256 (only for a file :meth:`verify_all` checked)."""
        key = f"{self.manifest.backup_id}/{entry.path}"
        try:
            data = self.storage.get(key)
        except BackupError as exc:
            raise CorruptBackupError(f"{entry.path}: {exc}") from None
        if not checksum and len(data) != entry.size:
            raise CorruptBackupError(f"{entry.path}: {len(data)} bytes, the manifest says {entry.size}")
        batches = verify_segment(
            data,
            name=entry.path,
            sha256=entry.sha256 if checksum else None,
            first_offset=entry.first_offset,
            last_offset=entry.last_offset,
            records=entry.records,
        )
        return data, batches

    def check_file(self, entry: FileEntry) -> None:
        """:meth:`read_file`'s checks, sha256 included, on the file read in pieces (not kept)."""
        check = StreamCheck(
            name=entry.path,
            sha256=entry.sha256,
            first_offset=entry.first_offset,
            last_offset=entry.last_offset,
            records=entry.records,
        )
        try:
            for piece in self.storage.read_pieces(f"{self.manifest.backup_id}/{entry.path}"):
                check.feed(piece)
        except BackupError as exc:
            raise CorruptBackupError(f"{entry.path}: {exc}") from None
        check.finish()

    def verify_all(self) -> list[str]:
        """Read and check every file a restore would use; returns the problems found (all of them).

        Files are checked by a few threads at once: reading, sha256 and CRC-32C release the GIL,
        and this pass reads the whole backup before anything is written."""
        files = [f for topic in self.topics for e in self.partitions(topic.name) for f in self.files(e)]

        def check(file: FileEntry) -> str | None:
            try:
                self.check_file(file)
            except CorruptBackupError as exc:
                return str(exc)
            return None

        if len(files) <= 1:
            found = [check(f) for f in files]
        else:
            with ThreadPoolExecutor(max_workers=min(VERIFY_THREADS, len(files))) as pool:
                found = list(pool.map(check, files))
        return [problem for problem in found if problem is not None]

    def iter_batches(
        self, entry: PartitionEntry, *, verified: bool = False
    ) -> Iterator[tuple[FileEntry, bytes, list[RecordBatchView]]]:
        """The partition's files in order, each read and checked; the next file is read and
        checked by a helper thread while the caller works on this one.

        ``verified``: :meth:`verify_all` has just checked every file's sha256 (a restore's plan),
        so this second read checks each file's size, framing, offsets and every batch's CRC-32C,
        not its sha256 again (which took a sixth of a restore's time)."""
        files = self.files(entry)
        read = functools.partial(self.read_file, checksum=not verified)
        if len(files) <= 1:
            for file in files:
                data, batches = read(file)
                yield file, data, batches
            return
        with ThreadPoolExecutor(max_workers=1) as pool:
            ahead = pool.submit(read, files[0])
            for n, file in enumerate(files):
                data, batches = ahead.result()
                if n + 1 < len(files):
                    ahead = pool.submit(read, files[n + 1])
                yield file, data, batches


RestoredBatch = tuple[RecordBatchView, RecordBatchView]
"""A stored batch, and the batch a restore writes in its place."""


def as_restored(
    views: Iterable[RecordBatchView], pool: Executor | None, name: str
) -> Iterator[RestoredBatch]:
    """Each stored batch with the batch to restore: the source's own, uncompressed, where the
    backup had compressed it (:func:`kompakt.backup.batches.original`), else the stored batch.

    With a ``pool``, those batches are decompressed by its threads (zstd and lz4 release the GIL)
    up to :data:`ORIGINALS_AHEAD` stored bytes ahead of the caller, so decompressing overlaps the
    caller's sending or writing; without one, here, as each is taken. The order is kept. A batch
    that does not decompress is an error naming the file and offset (its CRC was checked, so the
    backup wrote it so)."""
    pending: deque[tuple[RecordBatchView, Future[bytearray] | None]] = deque()
    queued = 0

    def take() -> RestoredBatch:
        nonlocal queued
        view, future = pending.popleft()
        queued -= view.size
        if future is None:
            return view, view
        try:
            return view, RecordBatchView(future.result())
        except KompaktError as exc:
            raise CorruptBackupError(f"{name}: batch at offset {view.base_offset}: {exc}") from None

    for view in views:
        raw = view.raw
        if not backup_compressed(raw):
            if not pending:
                yield view, view
                continue
            pending.append((view, None))
        elif pool is None:
            try:
                yield view, RecordBatchView(original(raw))
            except KompaktError as exc:
                raise CorruptBackupError(f"{name}: batch at offset {view.base_offset}: {exc}") from None
            continue
        else:
            pending.append((view, pool.submit(original, raw)))
        queued += view.size
        while pending and (queued >= ORIGINALS_AHEAD or _ready(pending[0][1])):
            yield take()
    while pending:
        yield take()


def _ready(future: Future[bytearray] | None) -> bool:
    return future is None or future.done()
