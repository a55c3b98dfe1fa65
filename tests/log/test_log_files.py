"""File naming and the crash-safe write helpers."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kompakt.errors import InvalidOffsetError, LogDirectoryError
from kompakt.log import files
from kompakt.log.files import (
    add_suffix,
    atomic_write_bytes,
    parse_offset_from_name,
    parse_partition_dir_name,
    partition_dir_name,
    partition_dir_suffix,
    remove_suffix,
    rename_durably,
    segment_file_name,
)
from kompakt.testing.faults import FaultInjectingFileOps, SimulatedCrashError


def test_segment_file_names() -> None:
    assert segment_file_name(0, "log") == "00000000000000000000.log"
    assert segment_file_name(1024, "index") == "00000000000000001024.index"
    assert segment_file_name(2**63 - 1, "timeindex") == "09223372036854775807.timeindex"
    for ext in ("txnindex", "snapshot"):
        assert segment_file_name(5, ext).endswith("." + ext)
    with pytest.raises(ValueError):
        segment_file_name(0, "cleaned")
    with pytest.raises(InvalidOffsetError):
        segment_file_name(-1, "log")


def test_offset_parsed_before_first_dot() -> None:
    assert parse_offset_from_name("00000000000000001024.log") == 1024
    assert parse_offset_from_name("00000000000000001024.log.cleaned") == 1024
    assert parse_offset_from_name("00000000000000000007.timeindex.deleted") == 7
    assert parse_offset_from_name("partition.metadata") is None
    assert parse_offset_from_name("leader-epoch-checkpoint") is None


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_name_round_trip(offset: int) -> None:
    assert parse_offset_from_name(segment_file_name(offset, "log") + ".swap") == offset


def test_suffixes() -> None:
    path = Path("/d/00000000000000000000.log")
    cleaned = add_suffix(path, files.CLEANED_FILE_SUFFIX)
    assert cleaned.name == "00000000000000000000.log.cleaned"
    assert remove_suffix(cleaned, ".cleaned") == path
    with pytest.raises(ValueError):
        remove_suffix(path, ".swap")


@pytest.mark.parametrize(
    ("name", "topic", "partition"),
    [
        ("my-topic-3", "my-topic", 3),
        ("a-0", "a", 0),
        ("dotted.topic_name-12", "dotted.topic_name", 12),
        ("x--1-7", "x--1", 7),
    ],
)
def test_partition_dir_names(name: str, topic: str, partition: int) -> None:
    assert parse_partition_dir_name(name) == (topic, partition)
    assert partition_dir_name(topic, partition) == name
    assert partition_dir_suffix(name) is None


def test_marked_partition_dirs() -> None:
    unique = uuid.UUID(int=0xABC)
    for suffix in ("-delete", "-future", "-stray"):
        name = partition_dir_name("my-topic", 3, suffix, unique)
        assert name == f"my-topic-3.{unique.hex}{suffix}"
        assert parse_partition_dir_name(name) == ("my-topic", 3)
        assert partition_dir_suffix(name) == suffix


@pytest.mark.parametrize("name", ["topic", "topic-", "-3", "topic-x"])
def test_bad_partition_dir_names(name: str) -> None:
    with pytest.raises(LogDirectoryError, match=name):
        parse_partition_dir_name(name)


def test_atomic_write_leaves_no_tmp(tmp_path: Path) -> None:
    target = tmp_path / "file"
    atomic_write_bytes(target, b"one")
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_atomic_write_crash_at_every_step_keeps_old_or_new(tmp_path: Path) -> None:
    target = tmp_path / "file"
    atomic_write_bytes(target, b"old")
    counting = FaultInjectingFileOps()
    atomic_write_bytes(target, b"new", counting)
    assert [op for op, _ in counting.log] == ["create", "write", "fsync", "rename", "fsync_dir"]
    for fail_at in range(counting.count):
        atomic_write_bytes(target, b"old")
        with pytest.raises(SimulatedCrashError):
            atomic_write_bytes(target, b"new", FaultInjectingFileOps(fail_at))
        assert target.read_bytes() == (b"new" if fail_at >= 4 else b"old")
    assert files.DEFAULT_FILE_OPS.__class__ is files.OsFileOps


def test_rename_durably(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    src = tmp_path / "a" / "x.log.swap"
    src.write_bytes(b"data")
    ops = FaultInjectingFileOps()
    rename_durably(src, tmp_path / "b" / "x.log", ops)
    assert (tmp_path / "b" / "x.log").read_bytes() == b"data"
    assert not src.exists()
    assert [op for op, _ in ops.log] == ["rename", "fsync_dir", "fsync_dir"]
