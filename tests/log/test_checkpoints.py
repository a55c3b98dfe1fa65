"""Offset and leader-epoch checkpoint files in Kafka's text format."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kompakt.errors import CorruptCheckpointError
from kompakt.log.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    OFFSET_CHECKPOINT_FILES,
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from tests.support.profiles import examples


def test_file_names() -> None:
    assert OFFSET_CHECKPOINT_FILES == (
        "cleaner-offset-checkpoint",
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "replication-offset-checkpoint",
    )


def test_exact_format_and_round_trip(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE)
    checkpoint.write({("b-topic", 1): 20, ("a.topic", 0): 5})
    assert checkpoint.path.read_text() == "0\n2\na.topic 0 5\nb-topic 1 20\n"
    assert checkpoint.read() == {("a.topic", 0): 5, ("b-topic", 1): 20}
    assert sorted(p.name for p in tmp_path.iterdir()) == [CLEANER_OFFSET_CHECKPOINT_FILE]


def test_empty_and_missing_files(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    assert OffsetCheckpointFile(path).read() == {}
    path.write_bytes(b"")
    assert OffsetCheckpointFile(path).read() == {}
    OffsetCheckpointFile(path).write({})
    assert path.read_text() == "0\n0\n"
    assert OffsetCheckpointFile(path).read() == {}


def test_reads_kafka_whitespace(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_text("0\n1\ntopic   3\t99\n")
    assert OffsetCheckpointFile(path).read() == {("topic", 3): 99}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("1\n0\n", "Unrecognized version of the checkpoint file .* at line 1"),
        ("x\n0\n", "Unrecognized version"),
        ("0\n", "Malformed entry count .* at line 2"),
        ("0\nzwei\n", "Malformed entry count .* at line 2"),
        ("0\n1\ntopic 0\n", r"Malformed line in checkpoint file .* at line 3: 'topic 0'"),
        ("0\n1\ntopic 0 5 extra\n", "at line 3"),
        ("0\n1\ntopic x 5\n", "at line 3"),
        ("0\n2\nt 0 1\nt 1 nope\n", "at line 4"),
        ("0\n2\nt 0 1\n\n", "at line 4"),
        ("0\n2\ntopic 0 5\n", "Expected 2 entries in checkpoint file .*, but found 1"),
        ("0\n0\ntopic 0 5\n", "Expected 0 entries in checkpoint file .*, but found 1"),
    ],
)
def test_malformed_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "cleaner-offset-checkpoint"
    path.write_text(content)
    with pytest.raises(CorruptCheckpointError, match=message) as info:
        OffsetCheckpointFile(path).read()
    assert str(path) in str(info.value)


@settings(max_examples=examples(50))
@given(
    st.dictionaries(
        st.tuples(st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True), st.integers(0, 10_000)),
        st.integers(0, 2**63 - 1),
        max_size=20,
    )
)
def test_round_trip_model(
    tmp_path_factory: pytest.TempPathFactory, entries: dict[tuple[str, int], int]
) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path_factory.mktemp("cp") / "log-start-offset-checkpoint")
    checkpoint.write(entries)
    assert checkpoint.read() == entries


def test_leader_epoch_checkpoint(tmp_path: Path) -> None:
    checkpoint = LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint")
    assert checkpoint.read() == []
    entries = [EpochEntry(0, 0), EpochEntry(3, 120), EpochEntry(4, 500)]
    checkpoint.write(entries)
    assert checkpoint.path.read_text() == "0\n3\n0 0\n3 120\n4 500\n"
    assert checkpoint.read() == entries
    checkpoint.path.write_text("0\n1\n0 0 0\n")
    with pytest.raises(CorruptCheckpointError, match="at line 3"):
        checkpoint.read()
