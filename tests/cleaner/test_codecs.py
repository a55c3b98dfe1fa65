"""``LogCleanerTest.testCleaningWithDeletes`` and ``testDuplicateCheckAfterCleaning`` (reference scenarios S9
and S17) over all five codecs, with both offset maps.

Rebuilt batches keep their codec (``MemoryRecords.filterTo``); the hashed and the exact map give
byte-identical logs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.clock import FakeClock
from kompakt.errors import DuplicateSequenceError
from kompakt.log.partition_log import PartitionLog
from kompakt.records.batch import Compression
from kompakt.records.builder import SimpleRecord, build_batch

from ._harness import (
    B,
    K,
    O,
    S,
    all_records,
    append_kv,
    batches,
    clean,
    lct_log,
    log_bytes,
    producer_batch,
    reopen,
    roll,
    two_pass_clean,
)

CODECS = list(Compression)


def _deletes_workload(log: PartitionLog, codec: Compression) -> int:
    while len(log.segments) < 2:
        o = log.log_end_offset
        append_kv(log, o, o, compression=codec)
    leo = log.log_end_offset
    for k in range(0, leo, 2):
        append_kv(log, k, None, compression=codec)
    i = leo
    while len(log.segments) < 4:
        append_kv(log, i, i, compression=codec)
        i += 1
    return leo


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
def test_cleaning_with_deletes_per_codec(tmp_path: Path, codec: Compression) -> None:
    """Kafka's ``LogCleanerTest.testCleaningWithDeletes`` (reference scenario S9)."""
    logs = []
    for hashed in (False, True):
        clock = FakeClock()
        log = lct_log(tmp_path, clock, name=f"t-{int(hashed)}")
        leo = _deletes_workload(log, codec)
        clean(log, 0, map_slots=4096, hashed=hashed)
        assert not any(k < leo and k % 2 == 0 for k in K(log))
        tombstones = [k for _o, k, v in all_records(log) if v is None]
        assert tombstones == [str(k).encode() for k in range(0, leo, 2)]
        for view, recs in batches(log):
            assert view.compression == (codec if recs else Compression.NONE)
            assert view.is_valid()
        two_pass_clean(log, 0, clock.now_ms(), map_slots=4096, hashed=hashed)
        assert [k for _o, k, v in all_records(log) if v is None] == []
        logs.append(log)
    assert [b for _base, b in log_bytes(logs[0])] == [b for _base, b in log_bytes(logs[1])]


def _multi_record_workload(log: PartitionLog, codec: Compression) -> None:
    """Multi-record batches where some records survive and some do not (forces rebuilds)."""
    for r in range(30):
        records = [
            SimpleRecord(str((r * 3 + j) % 7).encode(), f"v{r}-{j}".encode(), 1000 + r) for j in range(4)
        ]
        if r % 5 == 0:
            records.append(SimpleRecord(str(r % 7).encode(), None, 1000 + r))
        log.append(build_batch(records, compression=codec))
    roll(log)


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
def test_multi_record_batches_keep_codec_and_offsets(tmp_path: Path, codec: Compression) -> None:
    logs = []
    for hashed in (False, True):
        log = lct_log(tmp_path, FakeClock(), name=f"t-{int(hashed)}", internal_segment_bytes=2048)
        _multi_record_workload(log, codec)
        before = all_records(log)
        last_offsets = set(B(log))
        clean(log, 0, map_slots=64, hashed=hashed)
        after = all_records(log)
        latest = {k: (o, k, v) for o, k, v in before}
        assert sorted(latest.values()) == after
        assert set(B(log)) <= last_offsets
        for view, recs in batches(log):
            assert view.is_valid()
            assert view.compression == (codec if recs else Compression.NONE)
        logs.append(log)
    assert [b for _base, b in log_bytes(logs[0])] == [b for _base, b in log_bytes(logs[1])]


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
def test_duplicate_check_after_cleaning_per_codec(tmp_path: Path, codec: Compression) -> None:
    """Kafka's ``LogCleanerTest.testDuplicateCheckAfterCleaning`` (reference scenario S17)."""
    log = lct_log(tmp_path, FakeClock(), internal_segment_bytes=2048)
    p1 = producer_batch(log, 1, (1, 2, 3), transactional=False, compression=codec)
    p2 = producer_batch(log, 2, (3, 1, 4), transactional=False, compression=codec)
    p3 = producer_batch(log, 3, (1, 4), transactional=False, compression=codec)
    for raw in (p1, p2, p3):
        log.append(raw)
    roll(log)
    clean(log, 0)
    assert (B(log), S(log), K(log), O(log)) == ([2, 5, 7], {1: 2, 2: 2, 3: 1}, [2, 3, 1, 4], [1, 3, 6, 7])
    log = reopen(log)
    for raw, expected in ((p1, (0, 2)), (p3, (6, 7)), (p2, (3, 5))):
        with pytest.raises(DuplicateSequenceError) as info:
            log.append(raw)
        assert (info.value.first_offset, info.value.last_offset) == expected
    log.append(producer_batch(log, 4, (2,), transactional=False, compression=codec))
    roll(log)
    clean(log, 0)
    assert (S(log), B(log), K(log), O(log)) == (
        {1: 2, 2: 2, 3: 1, 4: 0},
        [2, 5, 7, 8],
        [3, 1, 4, 2],
        [3, 6, 7, 8],
    )
    log = reopen(log)
    with pytest.raises(DuplicateSequenceError) as info:
        log.append(p1)
    assert (info.value.first_offset, info.value.last_offset) == (0, 2)
