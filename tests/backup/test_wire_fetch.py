"""The backup's own Fetch answer reader (records as views of the frame) and its reused buffers."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kompakt.backup import wire
from kompakt.backup.errors import BackupError
from kompakt.protocol import codec

FETCH = 1
VERSIONS = range(4, 13)

_partition = st.fixed_dictionaries(
    {
        "partition_index": st.integers(0, 2**31 - 1),
        "error_code": st.sampled_from(
            [
                codec.ErrorCode.none,
                codec.ErrorCode.offset_out_of_range,
                codec.ErrorCode.not_leader_or_follower,
            ]
        ),
        "high_watermark": st.integers(-1, 2**63 - 1),
        "last_stable_offset": st.integers(-1, 2**63 - 1),
        "log_start_offset": st.integers(-1, 2**63 - 1),
        "aborted_transactions": st.none()
        | st.lists(
            st.fixed_dictionaries(
                {"producer_id": st.integers(-1, 2**63 - 1), "first_offset": st.integers(0, 2**63 - 1)}
            ),
            max_size=3,
        ),
        "preferred_read_replica": st.integers(-1, 5),
        "records": st.none() | st.binary(max_size=300),
        # Tagged fields (v12): the reader must step over them.
        "current_leader": st.fixed_dictionaries(
            {"leader_id": st.integers(-1, 9), "leader_epoch": st.integers(-1, 99)}
        ),
    }
)
_answer = st.lists(st.tuples(st.text(min_size=1, max_size=20), st.lists(_partition, max_size=3)), max_size=3)


_Topics = list[tuple[str, list[dict[str, Any]]]]


def _frame(version: int, topics: _Topics, correlation: int = 7) -> bytes:
    body = codec.build(
        codec.load_response_schema(FETCH, version),
        {
            "throttle_time": 0,
            "error_code": codec.ErrorCode.none,
            "session_id": 0,
            "responses": [{"topic": t, "partitions": ps} for t, ps in topics],
        },
        zero_fill=True,
    )
    return b"".join(bytes(chunk) for chunk in codec.encode_response(correlation, body))[4:]


def _kio(frame: bytes, version: int) -> list[tuple[Any, ...]]:
    _, body = codec.decode_response(memoryview(frame), FETCH, version)
    return [
        (
            str(t.topic),
            int(p.partition_index),
            p.error_code.name,
            p.records or b"",
            int(p.high_watermark),
            int(p.last_stable_offset),
            int(getattr(p, "log_start_offset", -1)),
            [(int(a.producer_id), int(a.first_offset)) for a in (p.aborted_transactions or ())],
        )
        for t in body.responses
        for p in t.partitions
    ]


@settings(max_examples=60, deadline=None)
@given(version=st.sampled_from(VERSIONS), topics=_answer)
def test_the_reader_returns_what_kio_decodes(version: int, topics: _Topics) -> None:
    frame = _frame(version, topics)
    correlation, error, parts = wire._read_fetch(memoryview(frame), version)
    assert (correlation, error) == (7, "none")
    mine = [
        (
            p.topic,
            p.partition,
            p.error,
            bytes(p.records),
            p.high_watermark,
            p.last_stable_offset,
            p.log_start_offset,
            p.aborted,
        )
        for p in parts
    ]
    assert mine == _kio(frame, version)


class _Conn:
    """A connection whose next frame is given (what ``receive_frame`` reads into the buffer)."""

    address = "test:1"

    def __init__(self, frames: list[bytes]) -> None:
        self.frames = frames

    def receive_frame(self, name: str, *, wait_s: float = 0.0, buffer: Any = None) -> memoryview:
        frame = self.frames.pop(0)
        memory = buffer(len(frame))
        view = memoryview(memory)[: len(frame)]
        view[:] = frame
        return view.toreadonly()


def _records(fill: int) -> _Topics:
    data = bytes([fill]) * 1000
    return [("t", [{"partition_index": 0, "high_watermark": 5, "aborted_transactions": [], "records": data}])]


def test_a_buffer_is_reused_only_when_no_answer_still_views_it() -> None:
    frames = [_frame(12, _records(n), correlation=n) for n in range(1, 5)]
    fetcher = wire.Fetcher(_Conn(frames), 12)  # type: ignore[arg-type]
    first = wire._receive(fetcher, 1, 0)
    second = wire._receive(fetcher, 2, 0)
    # The first answer is still held: the second went into another buffer, the first is intact.
    assert bytes(first[0].records) == bytes([1]) * 1000
    assert bytes(second[0].records) == bytes([2]) * 1000
    del first
    third = wire._receive(fetcher, 3, 0)
    assert bytes(third[0].records) == bytes([3]) * 1000
    assert bytes(second[0].records) == bytes([2]) * 1000
    assert len(fetcher.frames._buffers) == 2  # the first one's buffer was taken again


def test_a_wrong_correlation_or_a_bad_frame_is_a_backup_error() -> None:
    fetcher = wire.Fetcher(_Conn([_frame(12, _records(1), correlation=3)]), 12)  # type: ignore[arg-type]
    with pytest.raises(BackupError, match="correlation id 3, not 4"):
        wire._receive(fetcher, 4, 0)
    truncated = _frame(11, _records(1))[:-10]
    fetcher = wire.Fetcher(_Conn([truncated]), 11)  # type: ignore[arg-type]
    with pytest.raises(BackupError, match="cannot decode Fetch v11"):
        wire._receive(fetcher, 7, 0)
    # A records length larger than the frame is refused by the bounds walk, before any view.
    frame = bytearray(_frame(4, _records(1)))
    at = frame.find(bytes([1]) * 1000) - 4
    frame[at : at + 4] = (len(frame) * 2).to_bytes(4, "big")
    fetcher = wire.Fetcher(_Conn([bytes(frame)]), 4)  # type: ignore[arg-type]
    with pytest.raises(BackupError, match="cannot decode Fetch v4"):
        wire._receive(fetcher, 7, 0)


def test_random_bytes_never_crash_the_reader() -> None:
    for seed in range(200):
        frame = (7).to_bytes(4, "big") + os.urandom(seed % 64)
        for version in (4, 12):
            fetcher = wire.Fetcher(_Conn([frame]), version)  # type: ignore[arg-type]
            with contextlib.suppress(BackupError):
                wire._receive(fetcher, 7, 0)
