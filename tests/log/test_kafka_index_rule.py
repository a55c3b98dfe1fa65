"""Offset and time indexes as Kafka 4.1 writes them (issue 14, item 11).

``LogSegment.append`` (KAFKA-806) indexes batch by batch: once more than ``index.interval.bytes``
were appended since the last entry, the next batch gets ``(its last offset, its own position)``
and the time index is offered ``(max timestamp so far, offset of that max)``. The fixture in
``fixtures/kafka41_compacted`` was written by a real Kafka 4.1.2 broker (see its README): kompakt
appending the same batches, and kompakt's cleaner compacting Kafka's pre-clean directory with
Kafka's ``now``, must write the same ``.log``, ``.index`` and ``.timeindex`` bytes.
"""

from __future__ import annotations

import dataclasses
import random
import shutil
from pathlib import Path

from kompakt.cleaner.cleaner import Cleaner
from kompakt.cleaner.offset_map import HashedOffsetMap
from kompakt.clock import FakeClock
from kompakt.log.config import LogConfig
from kompakt.log.partition_log import PartitionLog
from kompakt.records.batch import iter_batches

from .log_helpers import batch, config

FIXTURE = Path(__file__).parent / "fixtures" / "kafka41_compacted"
KAFKA_CLEAN_NOW_MS = 1_796_288_117_995
EXTENSIONS = (".log", ".index", ".timeindex")


def fixture_config() -> LogConfig:
    return dataclasses.replace(
        LogConfig.defaults(),
        cleanup_policy=frozenset({"compact"}),
        internal_segment_bytes=2048,
        index_interval_bytes=300,
    )


def segment_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.suffix in EXTENSIONS}


def differing(expected: dict[str, bytes], actual: dict[str, bytes]) -> list[str]:
    names = sorted(set(expected) | set(actual))
    return [n for n in names if expected.get(n) != actual.get(n)]


def test_produce_path_writes_kafkas_files(tmp_path: Path) -> None:
    log = PartitionLog(
        tmp_path / "fixture-0", "fixture", 0, fixture_config(), FakeClock(0), rng=random.Random(0)
    )
    for path in sorted((FIXTURE / "before").glob("*.log")):
        for view in iter_batches(path.read_bytes()):
            log.append_with_offsets(bytes(view.raw))
    log.close()
    expected = segment_files(FIXTURE / "before")
    assert differing(expected, segment_files(tmp_path / "fixture-0")) == []


def test_cleaner_writes_kafkas_files(tmp_path: Path) -> None:
    work = tmp_path / "fixture-0"
    shutil.copytree(FIXTURE / "before", work)
    clock = FakeClock(KAFKA_CLEAN_NOW_MS)
    log = PartitionLog(
        work, "fixture", 0, fixture_config(), clock, had_clean_shutdown=True, rng=random.Random(0)
    )
    cleaner = Cleaner(0, HashedOffsetMap(1 << 20, 0.9), clock)
    cleaner.clean(log, 0, log.active_segment.base_offset, now_ms=KAFKA_CLEAN_NOW_MS)
    log.close()
    expected = segment_files(FIXTURE / "after")
    assert differing(expected, segment_files(work)) == []


def kafka_rule(sizes: list[int], last_offsets: list[int], interval: int) -> list[tuple[int, int]]:
    """The offset-index entries Kafka 4.1's ``LogSegment.append`` writes for these batches."""
    entries, since, position = [], 0, 0
    for size, last in zip(sizes, last_offsets, strict=True):
        if since > interval:
            entries.append((last, position))
            since = 0
        position += size
        since += size
    return entries


def test_one_entry_per_batch_of_a_multi_batch_append(tmp_path: Path) -> None:
    """A single append of many batches (one produce request here; a cleaner chunk likewise) gets
    an entry per qualifying batch, pointing at that batch, not one entry for the whole append."""
    log = PartitionLog(tmp_path / "t-0", "t", 0, config(index_interval_bytes=4096), FakeClock(0))
    log.append(b"".join(batch(b"x" * 900, timestamp=1_000 + i) for i in range(40)))
    segment = log.active_segment
    views = [(view.size, view.last_offset) for _pos, view in segment.iter_batches(headers_only=True)]
    expected = kafka_rule([size for size, _ in views], [last for _, last in views], 4096)
    assert len(expected) > 5
    assert segment.offset_index.entry_table() == expected
    # The time index is offered (max timestamp so far, its offset) at each entry.
    assert segment.time_index.entry_table() == [(1_000 + last, last) for last, _ in expected]


def test_fetch_lookup_scans_at_most_an_interval_plus_one_batch(tmp_path: Path) -> None:
    harness_dir = tmp_path / "t-0"
    log = PartitionLog(harness_dir, "t", 0, config(index_interval_bytes=4096), FakeClock(0))
    # Leader appends of 30 batches each: one request, one write.
    offset = 0
    for _ in range(5):
        log.append(b"".join(batch(b"y" * 700) for _ in range(30)))
        offset += 30
    segment = log.active_segment
    positions = [pos for pos, _ in segment.iter_batches(headers_only=True)]
    sizes = {pos: view.size for pos, view in segment.iter_batches(headers_only=True)}
    for target in range(offset):
        start = segment.offset_index.lookup(target)[1]
        found = segment.translate_offset(target)
        assert found is not None and found.base_offset == target
        scanned = found.position - start
        assert scanned <= 4096 + max(sizes.values()), (target, start, found.position)
    assert len(positions) == offset


def test_an_append_that_would_overfill_the_index_keeps_what_fits(tmp_path: Path) -> None:
    """One append planning more entries than the index has slots appends anyway (the entries that
    fit are written), so a retried request cannot fail forever on a full index."""
    cfg = config(index_interval_bytes=0, segment_index_bytes=96)  # 12 offset slots, 8 time slots
    log = PartitionLog(tmp_path / "t-0", "t", 0, cfg, FakeClock(0))
    log.append(b"".join(batch(b"z" * 100) for _ in range(10)))
    assert log.log_end_offset == 10
    assert len(log.active_segment.offset_index.entry_table()) == 7  # 9 planned, 7 time slots free
    assert [log.read(i, 1 << 20).records != b"" for i in range(10)] == [True] * 10
