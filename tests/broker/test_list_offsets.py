"""ListOffsets: earliest, latest, max timestamp, by time, not found, v1 shape, errors."""

from __future__ import annotations

from typing import Any

import pytest

from kompakt.broker.dispatch import Dispatcher
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from kompakt.records.builder import SimpleRecord, build_batch


@pytest.fixture
def timed(log_manager: LogManager) -> str:
    log_manager.create_topic("timed", 1)
    partition_log = log_manager.get_log("timed", 0)
    for i, ts in enumerate([1000, 3000, 2000]):
        partition_log.append(build_batch([SimpleRecord(f"k{i}".encode(), b"v", ts)]))
    return "timed"


def list_offset(
    dispatcher: Dispatcher, topic: str, timestamp: int, version: int = 7, isolation: int = 0
) -> Any:
    values = {
        "replica_id": -1,
        "isolation_level": isolation,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}],
    }
    return call(dispatcher, ApiKey.LIST_OFFSETS, version, values).topics[0].partitions[0]


from tests.support.wire import call  # noqa: E402


@pytest.mark.parametrize(
    ("timestamp", "offset", "found_ts"),
    [(-2, 0, -1), (-1, 3, -1), (-3, 1, 3000), (0, 0, 1000), (1500, 1, 3000), (2500, 1, 3000), (3001, -1, -1)],
)
def test_list_offsets(dispatcher: Dispatcher, timed: str, timestamp: int, offset: int, found_ts: int) -> None:
    part = list_offset(dispatcher, timed, timestamp)
    assert (part.error_code, part.offset, part.timestamp) == (E.none, offset, found_ts)


def test_read_committed_latest_is_lso(dispatcher: Dispatcher, timed: str) -> None:
    assert list_offset(dispatcher, timed, -1, isolation=1).offset == 3


def test_v1_single_offset(dispatcher: Dispatcher, timed: str) -> None:
    part = list_offset(dispatcher, timed, -1, version=1)
    assert (part.error_code, part.offset) == (E.none, 3)
    assert list_offset(dispatcher, timed, -2, version=1).offset == 0


def test_empty_log(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic("empty", 1)
    assert list_offset(dispatcher, "empty", -2).offset == 0
    assert list_offset(dispatcher, "empty", -1).offset == 0
    assert list_offset(dispatcher, "empty", 5).offset == -1


def test_unknown_topic(dispatcher: Dispatcher) -> None:
    assert list_offset(dispatcher, "nope", -1).error_code == E.unknown_topic_or_partition
