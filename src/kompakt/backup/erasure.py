"""What a restore leaves out: records outside the time window, and records of erased keys.

The erasure filter serves deletion requests (GDPR's right to erasure) that arrive after a backup
was taken: the backup files stay as they are (they are checksummed evidence), and every restore
made from them drops each record whose key is listed. With ``on_match: tombstone`` the first
matching record of each key in each partition becomes a tombstone instead (same offset, same
timestamp, no value, no headers), so consumers and compacted topics downstream learn that the key
was deleted; the other records of the key are dropped. One tombstone is enough: every other
record of that key is gone, so nothing after it can bring the value back.

The time window (``time_window_start`` .. ``time_window_end``, both inclusive, epoch ms) is a
point-in-time restore over the *backed-up* records: for a compacted topic that is the source's
compacted history, not every value the key ever had.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kompakt.backup.config import ErasureConfig
from kompakt.records.record import Record


@dataclass
class FilterCounts:
    outside_window: int = 0
    erased: int = 0
    tombstoned: int = 0


@dataclass
class RecordFilter:
    """The restore's filters; :meth:`for_partition` gives the stateful per-partition part."""

    window_start: int | None = None
    window_end: int | None = None
    erasure: ErasureConfig = field(default_factory=ErasureConfig)

    @property
    def active(self) -> bool:
        return self.window_start is not None or self.window_end is not None or self.erasure.active

    def skips_file(self, min_timestamp: int, max_timestamp: int) -> bool:
        """Whether a whole file lies outside the window (so it need not even be read)."""
        if self.window_start is not None and max_timestamp < self.window_start:
            return True
        return self.window_end is not None and min_timestamp > self.window_end

    def for_partition(self) -> PartitionFilter:
        return PartitionFilter(self)


class PartitionFilter:
    """Applies a :class:`RecordFilter` to one partition's records, in offset order."""

    def __init__(self, spec: RecordFilter) -> None:
        self.spec = spec
        self.counts = FilterCounts()
        self._tombstoned: set[bytes] = set()

    def apply(self, records: list[Record]) -> tuple[list[Record], bool]:
        """The records to restore, and whether anything was removed or changed."""
        spec = self.spec
        start, end = spec.window_start, spec.window_end
        keys = spec.erasure.keys
        tombstone = spec.erasure.on_match == "tombstone"
        out: list[Record] = []
        changed = False
        for record in records:
            if (start is not None and record.timestamp < start) or (
                end is not None and record.timestamp > end
            ):
                self.counts.outside_window += 1
                changed = True
                continue
            if keys and record.key is not None and record.key in keys:
                changed = True
                if tombstone and record.key not in self._tombstoned:
                    self._tombstoned.add(record.key)
                    self.counts.tombstoned += 1
                    out.append(Record(record.offset, record.timestamp, record.key, None, ()))
                else:
                    self.counts.erased += 1
                continue
            out.append(record)
        return out, changed
