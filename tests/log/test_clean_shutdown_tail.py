"""A damaged active segment found after a clean shutdown (hardening item 2).

The same damage after a crash was cut into quarantine and the rest served, but after a clean
shutdown it took the partition offline (0 of 3,000 records served). Now both alike: the damaged
tail (no valid batch in it) is quarantined, the valid prefix served, the log end offset is the end
of that prefix, and the checkpoints follow it. Damage followed by an intact batch still takes the
partition offline (recovery step 8 in ``kompakt.log.recovery``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.checkpoint import (
    RECOVERY_POINT_OFFSET_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from kompakt.log.manager import LogManager
from kompakt.log.segment import batch_positions
from kompakt.log.segments import ManualScheduler
from kompakt.records.batch import iter_batches
from kompakt.records.builder import SimpleRecord, build_batch
from kompakt.records.record import decode_records

RECORDS = 3_000
PER_BATCH = 30
BATCHES = RECORDS // PER_BATCH
TP = ("t", 0)
SEGMENT = "00000000000000000000.log"


def value(i: int) -> bytes:
    return f"value-{i:05d}".encode() * 4


def manager(data_dir: Path) -> LogManager:
    clock = FakeClock()
    m = LogManager(data_dir, BrokerConfig.from_properties({}), clock, ManualScheduler(clock))
    m.open()
    return m


def closed_cleanly(data_dir: Path, configs: dict[str, str] | None = None) -> Path:
    """3,000 records in 100 batches of one partition, closed cleanly; the active segment's path."""
    m = manager(data_dir)
    m.create_topic("t", 1, configs)
    log = m.get_log(*TP)
    for b in range(BATCHES):
        records = [
            SimpleRecord(f"k{i}".encode(), value(i), timestamp=1_000 + i)
            for i in range(b * PER_BATCH, (b + 1) * PER_BATCH)
        ]
        log.append(build_batch(records))
    m.close()
    assert (data_dir / ".kafka_cleanshutdown").exists()
    path = data_dir / "t-0" / SEGMENT
    assert len(batch_positions(path.read_bytes())) == BATCHES
    return path


def served(m: LogManager) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record a consumer gets from the log start to the log end, CRCs checked as clients do."""
    log = m.get_log(*TP)
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        views = list(iter_batches(log.read(offset, 1 << 20).records))
        assert views, f"nothing readable at offset {offset}"
        for view in views:
            assert view.is_valid(), f"the batch at offset {view.base_offset} is served corrupt"
            out += [(r.offset, r.key, r.value) for r in decode_records(view)]
        offset = views[-1].next_offset
    return out


def expected(n: int) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(i, f"k{i}".encode(), value(i)) for i in range(n)]


def quarantined(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if ".corrupt-" in p.name}


# Each damage: (the file's new bytes, batches kept), from the file's bytes and its batch starts.
# (Garbage appended after the last batch was already cut at a clean start: test_recovery.py.)
Damage = Callable[[bytes, list[int]], tuple[bytes, int]]


def truncated_mid_batch(data: bytes, starts: list[int]) -> tuple[bytes, int]:
    return data[: starts[-1] + 500], BATCHES - 1


def truncated_below_the_last_index_entry(data: bytes, starts: list[int]) -> tuple[bytes, int]:
    """Half the file gone: the offset index now points past the end of the ``.log``."""
    return data[: starts[50] + 7], 50


def torn_last_batch(data: bytes, starts: list[int]) -> tuple[bytes, int]:
    """The last batch's header survived but its records are zeros (the file keeps its length)."""
    keep = starts[-1] + 100
    return data[:keep] + bytes(len(data) - keep), BATCHES - 1


def bad_crc_in_the_last_batch(data: bytes, starts: list[int]) -> tuple[bytes, int]:
    damaged = bytearray(data)
    damaged[-5] ^= 0x01
    return bytes(damaged), BATCHES - 1


DAMAGES: list[Damage] = [
    truncated_mid_batch,
    truncated_below_the_last_index_entry,
    torn_last_batch,
    bad_crc_in_the_last_batch,
]


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda d: d.__name__)
def test_damaged_tail_after_clean_shutdown_is_quarantined_and_the_rest_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: Damage
) -> None:
    path = closed_cleanly(tmp_path)
    data = path.read_bytes()
    starts = batch_positions(data)
    damaged, kept = damage(data, starts)
    path.write_bytes(damaged)
    cut_position = starts[kept]
    end = kept * PER_BATCH

    with caplog.at_level(logging.WARNING, logger="kompakt.log"):
        m = manager(tmp_path)
    assert m.offline_partitions == {}
    log = m.get_log(*TP)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, end, end)
    assert served(m) == expected(end)
    assert path.read_bytes() == data[:cut_position], "the valid prefix is kept byte for byte"
    assert quarantined(path.parent) == {f"{SEGMENT}.corrupt-{end}": damaged[cut_position:]}
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(f"to quarantine as {SEGMENT}.corrupt-{end}" in w for w in warnings), warnings
    assert any(
        f"offsets {end}..{RECORDS - 1} were acknowledged but are no longer in the file" in w for w in warnings
    ), warnings
    # The checkpoints follow the cut at once: a crash before the next periodic write must not take
    # the offsets the next appends reuse for flushed data.
    for name in (RECOVERY_POINT_OFFSET_CHECKPOINT_FILE, REPLICATION_OFFSET_CHECKPOINT_FILE):
        assert OffsetCheckpointFile(tmp_path / name).read()[TP] == end, name

    appended = log.append(build_batch([SimpleRecord(b"after", b"cut", timestamp=9_000)]))
    assert appended.first_offset == end
    assert served(m)[-1] == (end, b"after", b"cut")
    m.close()

    again = manager(tmp_path)
    assert again.offline_partitions == {}
    assert again.get_log(*TP).log_end_offset == end + 1
    assert served(again) == [*expected(end), (end, b"after", b"cut")]
    assert list(quarantined(path.parent)) == [f"{SEGMENT}.corrupt-{end}"], "nothing is cut twice"
    again.close()


def test_appends_after_the_cut_survive_a_crash(tmp_path: Path) -> None:
    """The recovery point checkpointed at the clean shutdown (3,000) lies above the cut log's end;
    were it left on disk, a crash would take the new, unflushed offsets 2,970.. for flushed data."""
    path = closed_cleanly(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: batch_positions(data)[-1] + 500])
    m = manager(tmp_path)
    log = m.get_log(*TP)
    for i in range(3):
        log.append(build_batch([SimpleRecord(b"new", f"{i}".encode(), timestamp=9_000)]))
    assert log.log_end_offset == 2_973
    m.close_without_flush()
    with path.open("r+b") as f:  # the crash tears the last, unflushed append
        f.truncate(path.stat().st_size - 3)

    after = manager(tmp_path)
    assert after.offline_partitions == {}
    assert after.get_log(*TP).log_end_offset == 2_972
    assert served(after)[-2:] == [(2_970, b"new", b"0"), (2_971, b"new", b"1")]
    after.close()


def test_damage_followed_by_an_intact_batch_after_clean_shutdown_stays_offline(tmp_path: Path) -> None:
    """A bad CRC in the second-to-last batch: the last batch is intact, acknowledged and flushed,
    so cutting there is the operator's call (``kompakt log repair``), not the start-up's."""
    # With index.interval.bytes above the segment's size, the start-up check walks all of it.
    path = closed_cleanly(tmp_path, {"index.interval.bytes": str(1 << 20)})
    data = bytearray(path.read_bytes())
    starts = batch_positions(data)
    data[starts[-1] - 5] ^= 0x01
    path.write_bytes(bytes(data))

    m = manager(tmp_path)
    assert list(m.offline_partitions) == [TP]
    reason = m.offline_partitions[TP]
    assert f"{path} at byte {starts[-2]}" in reason
    assert "found at start-up after a clean shutdown" in reason
    assert f"a valid batch follows at byte {starts[-1]}" in reason
    assert f"valid only up to offset {RECORDS - 2 * PER_BATCH}" in reason
    assert f"kompakt log repair {path.parent}" in reason
    m.close()
    assert path.read_bytes() == bytes(data), "nothing is cut"
    assert quarantined(path.parent) == {}
    assert OffsetCheckpointFile(tmp_path / RECOVERY_POINT_OFFSET_CHECKPOINT_FILE).read()[TP] == RECORDS
