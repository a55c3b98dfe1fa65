"""CreateTopics, DeleteTopics and CreatePartitions through the dispatcher, per version."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from kompakt.broker import topic_admin
from kompakt.broker.context import Broker
from kompakt.broker.dispatch import HANDLERS, Dispatcher
from kompakt.log.manager import LogManager
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from tests.support.wire import call

ZERO = uuid.UUID(int=0)


def topic(
    name: str,
    partitions: int = 1,
    rf: int = 1,
    configs: Sequence[tuple[str, str | None]] = (),
    assignments: Sequence[tuple[int, Sequence[int]]] = (),
) -> dict[str, object]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": rf,
        "assignments": [{"partition_index": i, "broker_ids": list(b)} for i, b in assignments],
        "configs": [{"name": k, "value": v} for k, v in configs],
    }


def create(
    dispatcher: Dispatcher, *topics: dict[str, object], version: int = 7, validate_only: bool = False
) -> list[Any]:
    response = call(
        dispatcher,
        ApiKey.CREATE_TOPICS,
        version,
        {"topics": list(topics), "timeout": 5000, "validate_only": validate_only},
    )
    return list(response.topics)


def test_advertised_ranges() -> None:
    ranges = {key: (spec.min_version, spec.max_version) for key, spec in HANDLERS.items()}
    assert ranges[ApiKey.CREATE_TOPICS] == (2, 7)
    assert ranges[ApiKey.DELETE_TOPICS] == (1, 6)
    assert ranges[ApiKey.DESCRIBE_CONFIGS] == (1, 4)
    assert ranges[ApiKey.ALTER_CONFIGS] == (0, 2)
    assert ranges[ApiKey.INCREMENTAL_ALTER_CONFIGS] == (0, 1)
    assert ranges[ApiKey.CREATE_PARTITIONS] == (0, 3)
    for key in (
        ApiKey.CREATE_TOPICS,
        ApiKey.DELETE_TOPICS,
        ApiKey.CREATE_PARTITIONS,
        ApiKey.DESCRIBE_CONFIGS,
    ):
        assert HANDLERS[key].blocking


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6, 7])
def test_create_topic_every_version(dispatcher: Dispatcher, log_manager: LogManager, version: int) -> None:
    [result] = create(
        dispatcher, topic("orders", 3, configs=[("cleanup.policy", "compact")]), version=version
    )
    assert (result.name, result.error_code, result.error_message) == ("orders", E.none, None)
    meta = log_manager.topics()["orders"]
    assert meta.partitions == 3 and meta.configs == {"cleanup.policy": "compact"}
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (3, 1)
        configs = {c.name: c for c in result.configs}
        assert configs["cleanup.policy"].value == "compact"
        assert configs["cleanup.policy"].config_source == 1  # TOPIC_CONFIG
        assert configs["segment.bytes"].config_source == 5  # DEFAULT_CONFIG
        assert not configs["segment.bytes"].read_only and not configs["segment.bytes"].is_sensitive
    if version >= 7:
        assert result.topic_id == meta.topic_id


def test_create_defaults_from_broker(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    [result] = create(dispatcher, topic("t", -1, -1))
    assert result.error_code == E.none
    assert (result.num_partitions, result.replication_factor) == (1, 1)
    assert log_manager.topics()["t"].partitions == 1


def test_create_errors(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    create(dispatcher, topic("exists"))
    create(dispatcher, topic("a_b"))
    results = {
        r.name: r
        for r in create(
            dispatcher,
            topic("exists"),
            topic("bad name!"),
            topic("zero", 0),
            topic("negative", -3),
            topic("rf3", 1, 3),
            topic("rf0", 1, 0),
            topic("cfg", configs=[("cleanup.policy", "shred")]),
            topic("unknown-cfg", configs=[("no.such.config", "1")]),
            topic("broker-name", configs=[("log.retention.hours", "1")]),
            topic("null-cfg", configs=[("retention.ms", None)]),
            topic("a.b"),
            topic("dup"),
            topic("dup"),
        )
    }
    assert results["exists"].error_code == E.topic_already_exists
    assert results["exists"].error_message == "Topic 'exists' already exists."
    assert results["bad name!"].error_code == E.invalid_topic_exception
    assert results["zero"].error_code == E.invalid_partitions
    assert results["negative"].error_code == E.invalid_partitions
    assert results["rf3"].error_code == E.invalid_replication_factor
    assert results["rf3"].error_message == "Replication factor: 3 larger than available brokers: 1."
    assert results["rf0"].error_code == E.invalid_replication_factor
    assert results["cfg"].error_code == E.invalid_config
    assert "cleanup.policy" in results["cfg"].error_message
    assert results["unknown-cfg"].error_code == E.invalid_config
    assert results["broker-name"].error_code == E.invalid_config
    assert "did you mean retention.ms" in results["broker-name"].error_message
    assert results["null-cfg"].error_code == E.invalid_config
    assert results["a.b"].error_code == E.invalid_topic_exception
    assert "collides" in results["a.b"].error_message
    assert results["dup"].error_code == E.invalid_request
    assert [r.name for r in create(dispatcher, topic("dup2"), topic("dup2"))] == ["dup2"]
    for failed in results.values():
        assert (failed.num_partitions, failed.replication_factor) == (-1, -1)
        assert failed.topic_id in (None, ZERO)  # kio decodes the zero uuid as None
    assert set(log_manager.topics()) == {"exists", "a_b"}


def test_create_validate_only(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    [ok, bad] = create(
        dispatcher, topic("v", 4), topic("w", configs=[("segment.bytes", "1")]), validate_only=True
    )
    assert (ok.error_code, ok.num_partitions) == (E.none, 4)
    assert bad.error_code == E.invalid_config
    assert log_manager.topics() == {}


def test_create_manual_assignment(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    [ok] = create(dispatcher, topic("m", -1, -1, assignments=[(0, [0]), (1, [0])]))
    assert ok.error_code == E.none and log_manager.topics()["m"].partitions == 2
    results = create(
        dispatcher,
        topic("other-broker", -1, -1, assignments=[(0, [1])]),
        topic("two-replicas", -1, -1, assignments=[(0, [0, 0])]),
        topic("empty", -1, -1, assignments=[(0, [])]),
        topic("gap", -1, -1, assignments=[(0, [0]), (2, [0])]),
        topic("counts-set", 2, -1, assignments=[(0, [0])]),
    )
    codes = {r.name: r.error_code for r in results}
    assert codes == {
        "other-broker": E.invalid_replica_assignment,
        "two-replicas": E.invalid_replica_assignment,
        "empty": E.invalid_replica_assignment,
        "gap": E.invalid_replica_assignment,
        "counts-set": E.invalid_request,
    }


# ---------------------------------------------------------------------------------------------- delete


def delete(dispatcher: Dispatcher, names: Sequence[str], version: int = 5) -> list[Any]:
    response = call(dispatcher, ApiKey.DELETE_TOPICS, version, {"topic_names": list(names), "timeout": 1000})
    return list(response.responses)


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_delete_by_name(dispatcher: Dispatcher, log_manager: LogManager, version: int) -> None:
    create(dispatcher, topic("gone", 2), topic("stays"))
    results = {r.name: r.error_code for r in delete(dispatcher, ["gone", "missing"], version)}
    assert results == {"gone": E.none, "missing": E.unknown_topic_or_partition}
    assert set(log_manager.topics()) == {"stays"}


def test_delete_v6_by_id_and_name(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    create(dispatcher, topic("by-id"), topic("by-name"), topic("both"))
    topic_id = log_manager.topics()["by-id"].topic_id
    both_id = log_manager.topics()["both"].topic_id
    unknown = uuid.uuid4()
    response = call(
        dispatcher,
        ApiKey.DELETE_TOPICS,
        6,
        {
            "topics": [
                {"name": None, "topic_id": topic_id},
                {"name": "by-name", "topic_id": ZERO},
                {"name": None, "topic_id": unknown},
                {"name": "both", "topic_id": both_id},
                {"name": None, "topic_id": ZERO},
            ],
            "timeout": 1000,
        },
    )
    by_key = {(r.name, r.topic_id): r for r in response.responses}
    assert by_key[("by-id", topic_id)].error_code == E.none
    names = {r.name: r.error_code for r in response.responses if r.name}
    assert names["by-name"] == E.none
    assert names["both"] == E.invalid_request
    assert by_key[(None, unknown)].error_code == E.unknown_topic_id
    assert by_key[(None, None)].error_code == E.invalid_request
    assert set(log_manager.topics()) == {"both"}


def test_delete_hooks_run_before_removal(broker: Broker, log_manager: LogManager) -> None:
    log_manager.create_topic("hooked", 3)
    seen: list[tuple[str, list[int], bool]] = []

    def hook(name: str, partitions: Sequence[int]) -> None:
        seen.append((name, list(partitions), name in log_manager.topics()))

    def broken(name: str, partitions: Sequence[int]) -> None:
        raise RuntimeError("a failing hook must not block the deletion")

    topic_admin.delete_topic(log_manager, broker.broker_config, "hooked", [broken, hook])
    assert seen == [("hooked", [0, 1, 2], True)]
    assert "hooked" not in log_manager.topics()


def test_delete_internal_topic_refused(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact"})
    [result] = delete(dispatcher, ["__consumer_offsets"])
    assert result.error_code == E.invalid_topic_exception
    assert "__consumer_offsets" in log_manager.topics()


def test_delete_duplicates(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    create(dispatcher, topic("twice"))
    [result] = delete(dispatcher, ["twice", "twice"])
    assert result.error_code == E.invalid_request
    assert "twice" in log_manager.topics()


class TestDeletionDisabled:
    @pytest.fixture
    def static_props(self) -> dict[str, str]:
        return {"delete.topic.enable": "false"}

    @pytest.mark.parametrize(
        ("version", "code"),
        [
            (1, E.invalid_request),
            (2, E.invalid_request),
            (3, E.topic_deletion_disabled),
            (6, E.topic_deletion_disabled),
        ],
    )
    def test_refused(self, dispatcher: Dispatcher, log_manager: LogManager, version: int, code: E) -> None:
        log_manager.create_topic("kept", 1)
        if version >= 6:
            response = call(
                dispatcher,
                ApiKey.DELETE_TOPICS,
                version,
                {"topics": [{"name": "kept", "topic_id": ZERO}], "timeout": 1},
            )
            results = list(response.responses)
        else:
            results = delete(dispatcher, ["kept"], version)
        assert [(r.name, r.error_code) for r in results] == [("kept", code)]
        assert "kept" in log_manager.topics()


# ---------------------------------------------------------------------------------------------- partitions


def grow(
    dispatcher: Dispatcher,
    name: str,
    count: int,
    version: int = 3,
    validate_only: bool = False,
    assignments: Sequence[Sequence[int]] | None = None,
) -> Any:
    response = call(
        dispatcher,
        ApiKey.CREATE_PARTITIONS,
        version,
        {
            "topics": [
                {
                    "name": name,
                    "count": count,
                    "assignments": None
                    if assignments is None
                    else [{"broker_ids": list(a)} for a in assignments],
                }
            ],
            "timeout": 1000,
            "validate_only": validate_only,
        },
    )
    [result] = response.results
    return result


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_create_partitions(dispatcher: Dispatcher, log_manager: LogManager, version: int) -> None:
    log_manager.create_topic("p", 2)
    result = grow(dispatcher, "p", 4, version)
    assert result.error_code == E.none
    assert log_manager.topics()["p"].partitions == 4
    log_manager.get_log("p", 3)


def test_create_partitions_errors(dispatcher: Dispatcher, log_manager: LogManager) -> None:
    log_manager.create_topic("p", 3)
    shrink = grow(dispatcher, "p", 2)
    assert shrink.error_code == E.invalid_partitions
    assert shrink.error_message == "Topic currently has 3 partitions, which is higher than the requested 2."
    same = grow(dispatcher, "p", 3)
    assert (same.error_code, same.error_message) == (E.invalid_partitions, "Topic already has 3 partitions.")
    assert grow(dispatcher, "nope", 5).error_code == E.unknown_topic_or_partition
    assert grow(dispatcher, "p", 5, assignments=[[0]]).error_code == E.invalid_replica_assignment
    assert grow(dispatcher, "p", 4, assignments=[[7]]).error_code == E.invalid_replica_assignment
    assert grow(dispatcher, "p", 5, validate_only=True).error_code == E.none
    assert log_manager.topics()["p"].partitions == 3
    assert grow(dispatcher, "p", 4, assignments=[[0]]).error_code == E.none
    assert log_manager.topics()["p"].partitions == 4
