"""The one error map (issue 20): every KompaktError has a Kafka code chosen for it, and the errors
that used to fall to UNKNOWN_SERVER_ERROR answer what Kafka answers."""

from __future__ import annotations

import errno
import importlib
import pkgutil
from collections.abc import Iterator

import pytest

import kompakt
from kompakt.broker import topic_admin
from kompakt.broker.context import Broker
from kompakt.broker.error_codes import error_code_for, mapped_class
from kompakt.broker.handlers.fetch import PartitionFetch, read_partitions
from kompakt.broker.handlers.produce import produce_partition
from kompakt.errors import (
    CorruptCheckpointError,
    CorruptIndexError,
    KompaktError,
    LogDirectoryError,
)
from kompakt.log.manager import LogManager
from kompakt.log.partition_log import PartitionLog
from kompakt.protocol.codec import ErrorCode
from kompakt.records.builder import SimpleRecord, build_batch

from .conftest import NOW_MS


def _subclasses(cls: type[BaseException]) -> Iterator[type[BaseException]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_kompakt_error_anywhere_in_kompakt_has_a_chosen_code() -> None:
    for module in pkgutil.walk_packages(kompakt.__path__, "kompakt."):
        importlib.import_module(module.name)
    classes = set(_subclasses(KompaktError))
    assert len(classes) > 40  # the walk found the errors of every package
    unmapped = sorted(f"{c.__module__}.{c.__qualname__}" for c in classes if mapped_class(c) is None)
    assert unmapped == []
    # ... and chosen for them: the root itself is not in the map, so nothing inherits a code from it.
    assert mapped_class(KompaktError) is None
    assert all(mapped_class(c) is not KompaktError for c in classes)


def test_admin_error_is_a_kompakt_error_answered_with_its_own_code() -> None:
    message = "Replication factor: 3 larger than 1"
    error = topic_admin.AdminError(ErrorCode.invalid_replication_factor, message)
    assert isinstance(error, KompaktError)
    assert error_code_for(error) == ErrorCode.invalid_replication_factor
    assert topic_admin.as_admin_error(error) is error


def test_produce_to_an_illegal_topic_name_is_unknown_as_in_kafka(broker: Broker) -> None:
    batch = build_batch([SimpleRecord(b"k", b"v", NOW_MS)])
    response = produce_partition(broker, "no spaces allowed", 0, batch)
    assert response.error_code == ErrorCode.unknown_topic_or_partition
    assert "no spaces allowed" not in broker.logs.topics()


@pytest.mark.parametrize(
    "fault",
    [
        CorruptIndexError("index 00000000000000000000.index points past its segment"),
        CorruptCheckpointError("leader-epoch-checkpoint line 3 does not parse"),
        LogDirectoryError("data directory is not usable"),
    ],
)
def test_a_read_that_meets_damaged_storage_answers_kafka_storage_error(
    broker: Broker, log_manager: LogManager, monkeypatch: pytest.MonkeyPatch, fault: KompaktError
) -> None:
    log_manager.create_topic("t", 1)

    def damaged(self: PartitionLog, *args: object, **kwargs: object) -> object:
        raise fault

    monkeypatch.setattr(PartitionLog, "read_slice", damaged)
    result = read_partitions(broker, [PartitionFetch("t", 0, 0, 1 << 20)], 1 << 20, read_committed=False)
    assert [e.error_code for e in result.entries] == [ErrorCode.kafka_storage_error]


def test_create_topics_on_a_failing_disk_answers_kafka_storage_error(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: object, **kwargs: object) -> object:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(LogManager, "create_topic", full)
    with pytest.raises(topic_admin.AdminError) as raised:
        topic_admin.create_topic(
            broker.logs, broker.broker_config, broker.node_id, "t", 1, 1, [], [], validate_only=False
        )
    assert raised.value.code == ErrorCode.kafka_storage_error
    assert "No space left on device" in str(raised.value)
