"""The transaction APIs over the wire, through the dispatcher (requests and responses as kio
encodes them), on a broker with a real data directory."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.broker.txn.coordinator import TransactionCoordinator
from kompakt.broker.txn.state_manager import TxnConfig
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode
from kompakt.records.builder import SimpleRecord, build_batch
from tests.support.wire import call, dispatch, fetch_values, produce_values

TOPIC = "t"
TXN_ID = "app-1"


@pytest.fixture
def txn_broker(broker: Broker) -> Broker:
    assert broker.log_manager is not None and broker.producer_ids is not None
    broker.log_manager.create_topic(TOPIC, 2)
    broker.txn = TransactionCoordinator(
        broker.log_manager, broker.clock, broker.producer_ids, TxnConfig(transaction_log_num_partitions=2)
    )
    return broker


@pytest.fixture
def wire(txn_broker: Broker) -> Dispatcher:
    return Dispatcher(txn_broker)


def txn_batch(pid: int, epoch: int, seq: int, value: bytes) -> bytes:
    return build_batch(
        [SimpleRecord(b"k", value, 0)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )


def produce(wire: Dispatcher, records: bytes, partition: int = 0) -> Any:
    values = produce_values(TOPIC, partition, records)
    values["transactional_id"] = TXN_ID
    response = call(wire, ApiKey.PRODUCE, 9, values)
    return response.responses[0].partition_responses[0]


def init(wire: Dispatcher, version: int = 4) -> tuple[int, int]:
    r = call(
        wire, ApiKey.INIT_PRODUCER_ID, version, {"transactional_id": TXN_ID, "transaction_timeout": 60_000}
    )
    assert r.error_code is ErrorCode.none
    return int(r.producer_id), int(r.producer_epoch)


def add_partitions_v3(
    wire: Dispatcher, pid: int, epoch: int, topic: str, partitions: list[int]
) -> dict[int, Any]:
    r = call(
        wire,
        ApiKey.ADD_PARTITIONS_TO_TXN,
        3,
        {
            "v3_and_below_transactional_id": TXN_ID,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": partitions}],
        },
    )
    return {
        p.partition_index: p.partition_error_code
        for t in r.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def test_find_coordinator_for_a_transactional_id(wire: Dispatcher, txn_broker: Broker) -> None:
    r = call(wire, ApiKey.FIND_COORDINATOR, 3, {"key": TXN_ID, "key_type": 1})
    assert (r.error_code, r.node_id, r.port) == (ErrorCode.none, txn_broker.node_id, 19092)
    r = call(wire, ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [TXN_ID, ""]})
    assert [c.error_code for c in r.coordinators] == [ErrorCode.none, ErrorCode.none]  # Kafka answers "" too
    assert (
        call(wire, ApiKey.FIND_COORDINATOR, 3, {"key": "x", "key_type": 2}).error_code
        is ErrorCode.invalid_request
    )


def test_a_transaction_over_the_wire(wire: Dispatcher, txn_broker: Broker) -> None:
    pid, epoch = init(wire)
    # Not added to the transaction yet: the write is refused (KIP-890 verification).
    assert produce(wire, txn_batch(pid, epoch, 0, b"early")).error_code is ErrorCode.invalid_txn_state
    assert add_partitions_v3(wire, pid, epoch, TOPIC, [0]) == {0: ErrorCode.none}
    assert add_partitions_v3(wire, pid, epoch, "nope", [0]) == {0: ErrorCode.unknown_topic_or_partition}
    assert produce(wire, txn_batch(pid, epoch, 0, b"v0")).error_code is ErrorCode.none

    verify = {
        "transactions": [
            {
                "transactional_id": TXN_ID,
                "producer_id": pid,
                "producer_epoch": epoch,
                "verify_only": True,
                "topics": [{"name": TOPIC, "partitions": [0, 1]}],
            }
        ]
    }
    for version, absent in ((4, ErrorCode.transaction_abortable), (5, ErrorCode.transaction_abortable)):
        r = call(wire, ApiKey.ADD_PARTITIONS_TO_TXN, version, verify)
        errors = {
            p.partition_index: p.partition_error_code
            for p in r.results_by_transaction[0].topic_results[0].results_by_partition
        }
        assert errors == {0: ErrorCode.none, 1: absent}

    d = call(wire, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [TXN_ID]})
    [mine] = d.transaction_states
    assert (mine.transaction_state, [(t.topic, list(t.partitions)) for t in mine.topics]) == (
        "Ongoing",
        [(TOPIC, [0])],
    )
    producers = call(
        wire, ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": TOPIC, "partition_indexes": [0]}]}
    )
    [state] = producers.topics[0].partitions[0].active_producers
    assert (state.producer_id, state.current_txn_start_offset, state.last_sequence) == (pid, 0, 0)
    listed = call(
        wire,
        ApiKey.LIST_TRANSACTIONS,
        2,
        {"state_filters": ["Ongoing"], "transactional_id_pattern": "app-.*"},
    )
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
        (TXN_ID, "Ongoing")
    ]
    bad = call(wire, ApiKey.LIST_TRANSACTIONS, 2, {"transactional_id_pattern": "("})
    assert bad.error_code is ErrorCode.invalid_regular_expression

    fetched = (
        call(wire, ApiKey.FETCH, 12, fetch_values([(TOPIC, 0, 0)], isolation_level=1))
        .responses[0]
        .partitions[0]
    )
    assert (fetched.last_stable_offset, fetched.high_watermark, bytes(fetched.records)) == (0, 1, b"")

    end = {"transactional_id": TXN_ID, "producer_id": pid, "producer_epoch": epoch, "committed": False}
    assert call(wire, ApiKey.END_TXN, 3, end).error_code is ErrorCode.none
    fetched = (
        call(wire, ApiKey.FETCH, 12, fetch_values([(TOPIC, 0, 0)], isolation_level=1))
        .responses[0]
        .partitions[0]
    )
    assert (
        fetched.last_stable_offset,
        [(a.producer_id, a.first_offset) for a in fetched.aborted_transactions],
    ) == (
        2,
        [(pid, 0)],
    )
    # A late retry of the aborted transaction's batch must not open a hanging transaction.
    assert produce(wire, txn_batch(pid, epoch, 1, b"late")).error_code is ErrorCode.invalid_txn_state
    assert txn_broker.logs.get_log(TOPIC, 0).log_end_offset == 2
    stale = {**end, "producer_epoch": epoch + 1}
    assert call(wire, ApiKey.END_TXN, 1, stale).error_code is ErrorCode.invalid_producer_epoch  # v0-1 name
    assert call(wire, ApiKey.END_TXN, 2, stale).error_code is ErrorCode.producer_fenced


def test_init_producer_id_versions_and_fencing(wire: Dispatcher) -> None:
    pid, epoch = init(wire, version=0)
    assert init(wire, version=2) == (pid, epoch + 1)
    r = call(
        wire,
        ApiKey.INIT_PRODUCER_ID,
        3,
        {
            "transactional_id": TXN_ID,
            "transaction_timeout": 60_000,
            "producer_id": pid + 50,
            "producer_epoch": 0,
        },
    )
    assert r.error_code is ErrorCode.invalid_producer_epoch  # PRODUCER_FENCED only from v4
    r = call(wire, ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": TXN_ID, "transaction_timeout": 10**9})
    assert r.error_code is ErrorCode.invalid_transaction_timeout


def test_txn_offset_commit_needs_add_offsets_first(wire: Dispatcher, txn_broker: Broker) -> None:
    pid, epoch = init(wire)
    commit = {
        "transactional_id": TXN_ID,
        "group_id": "g",
        "producer_id": pid,
        "producer_epoch": epoch,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [{"partition_index": 0, "committed_offset": 5, "committed_metadata": None}],
            }
        ],
    }
    r = call(wire, ApiKey.TXN_OFFSET_COMMIT, 3, commit)
    assert r.topics[0].partitions[0].error_code is not ErrorCode.none  # no offsets store on this broker
    add = {"transactional_id": TXN_ID, "producer_id": pid, "producer_epoch": epoch, "group_id": "g"}
    assert call(wire, ApiKey.ADD_OFFSETS_TO_TXN, 3, add).error_code is ErrorCode.none
    add_stale = {**add, "producer_epoch": epoch + 1}
    assert call(wire, ApiKey.ADD_OFFSETS_TO_TXN, 1, add_stale).error_code is ErrorCode.invalid_producer_epoch
    assert (
        call(wire, ApiKey.ADD_OFFSETS_TO_TXN, 3, {**add, "group_id": ""}).error_code
        is ErrorCode.invalid_group_id
    )


def test_api_versions_advertises_the_transaction_apis(wire: Dispatcher) -> None:
    r = call(wire, ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    ranges = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    # Kafka 4.1.2's ranges for these (its ApiVersions answer), Produce too.
    assert {key: ranges[key] for key in (0, 22, 24, 25, 26, 28, 61, 65, 66)} == {
        0: (3, 12),
        22: (0, 5),
        24: (0, 5),
        25: (0, 4),
        26: (0, 5),
        28: (0, 5),
        61: (0, 0),
        65: (0, 0),
        66: (0, 2),
    }
    # transaction.version supported 0-2 and finalized at 2, as a Kafka 4.1 cluster formats itself:
    # the Java producer then runs transactions version 2. metadata.version and group.version are
    # finalized at Kafka 4.1.2's levels (its ApiVersions v4 answer: group.version 1,
    # metadata.version 27 = 4.1-IV1), at the one level kompakt serves.
    assert [(f.name, f.min_version, f.max_version) for f in r.supported_features] == [
        ("group.version", 1, 1),
        ("metadata.version", 27, 27),
        ("transaction.version", 0, 2),
    ]
    assert [(f.name, f.min_version_level, f.max_version_level) for f in r.finalized_features] == [
        ("group.version", 1, 1),
        ("metadata.version", 27, 27),
        ("transaction.version", 2, 2),
    ]
    assert r.finalized_features_epoch >= 0


def test_a_v1_only_broker_finalizes_transaction_version_1(txn_broker: Broker) -> None:
    assert txn_broker.txn is not None
    txn_broker.txn.config = dataclasses.replace(txn_broker.txn.config, transaction_version=1)
    r = call(
        Dispatcher(txn_broker),
        ApiKey.API_VERSIONS,
        3,
        {"client_software_name": "t", "client_software_version": "1"},
    )
    assert [(f.name, f.min_version_level, f.max_version_level) for f in r.finalized_features] == [
        ("group.version", 1, 1),
        ("metadata.version", 27, 27),
        ("transaction.version", 1, 1),
    ]


def test_describe_of_an_unknown_id_answers_not_found_with_start_time_minus_one(wire: Dispatcher) -> None:
    result = dispatch(wire, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["ghost"]})
    raw = b"".join(bytes(c) for c in codec.encode_response(1, result))
    # error code 105 (TRANSACTIONAL_ID_NOT_FOUND), then after the id, state "" and timeout 0,
    # the start time -1 as Kafka sends it (kio cannot decode a negative time, so bytes are checked).
    assert result.transaction_states[0].error_code is ErrorCode.transactional_id_not_found
    assert b"\x00\x69\x06ghost\x01\x00\x00\x00\x00" + b"\xff" * 8 in raw


def _finalized(wire: Dispatcher) -> tuple[list[tuple[str, int, int]], int]:
    r = call(wire, ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    return [
        (f.name, f.min_version_level, f.max_version_level)
        for f in r.finalized_features
        if f.name == "transaction.version"
    ], r.finalized_features_epoch


def test_update_features_downgrades_and_upgrades_transaction_version_as_kafka(
    wire: Dispatcher, txn_broker: Broker
) -> None:
    """kafka-features downgrade|upgrade --feature transaction.version=N, with Kafka 4.1's checks
    and messages (the Java Admin against Kafka 4.1.2 got the same answers)."""

    def update(version: int, level: int, upgrade_type: int = 1, validate_only: bool = False) -> Any:
        update_key: dict[str, object] = {"feature": "transaction.version", "max_version_level": level}
        if version == 0:
            update_key["allow_downgrade"] = upgrade_type != 1
        else:
            update_key["upgrade_type"] = upgrade_type
        values: dict[str, object] = {"timeout": 60_000, "feature_updates": [update_key]}
        if version > 0:
            values["validate_only"] = validate_only
        return call(wire, ApiKey.UPDATE_FEATURES, version, values)

    start, epoch = _finalized(wire)
    assert start == [("transaction.version", 2, 2)]
    refused = update(2, 1)
    assert refused.error_code is ErrorCode.invalid_update_version
    assert refused.error_message == (
        "The update failed for all features since the following feature had an error: Invalid "
        "update version 1 for feature transaction.version. Can't downgrade the version of this "
        "feature without setting the upgrade type to either safe or unsafe downgrade."
    )
    too_new = update(2, 3)
    assert too_new.error_message is not None
    assert too_new.error_message.endswith("Local controller 0 only supports versions 0-2")
    assert update(1, 1, upgrade_type=2, validate_only=True).error_code is ErrorCode.none
    assert _finalized(wire)[0] == start
    ok = update(0, 1, upgrade_type=2)  # v0: allow_downgrade
    assert ok.error_code is ErrorCode.none
    assert [(r.feature, r.error_code) for r in ok.results] == [("transaction.version", ErrorCode.none)]
    levels, new_epoch = _finalized(wire)
    assert (levels, new_epoch > epoch) == ([("transaction.version", 1, 1)], True)
    # Persisted: a restarted coordinator on this data directory finalizes 1, not its configured 2.
    assert txn_broker.log_manager is not None and txn_broker.producer_ids is not None
    restarted = TransactionCoordinator(
        txn_broker.log_manager,
        txn_broker.clock,
        txn_broker.producer_ids,
        TxnConfig(transaction_log_num_partitions=2),
    )
    restarted.load()
    assert restarted.transaction_version == 1
    assert update(2, 2).error_code is ErrorCode.none
    assert _finalized(wire)[0] == [("transaction.version", 2, 2)]


def test_produce_v12_adds_the_partition_and_end_txn_v5_bumps_the_epoch(wire: Dispatcher) -> None:
    """A transactions-v2 producer over the wire: no AddPartitionsToTxn; errors at v10-12 encode."""
    pid, epoch = init(wire, version=5)
    values = produce_values(TOPIC, 0, txn_batch(pid, epoch, 0, b"v0"))
    values["transactional_id"] = TXN_ID
    for version in (10, 11, 12):
        missing = call(wire, ApiKey.PRODUCE, version, produce_values("no-such-topic!", 0, b""))
        assert missing.responses[0].partition_responses[0].error_code is ErrorCode.unknown_topic_or_partition
    # v11 does not add: the partition is not in the transaction (TRANSACTION_ABORTABLE from v11).
    early = call(wire, ApiKey.PRODUCE, 11, values).responses[0].partition_responses[0]
    assert early.error_code is ErrorCode.transaction_abortable
    added = call(wire, ApiKey.PRODUCE, 12, values).responses[0].partition_responses[0]
    assert (added.error_code, added.base_offset) == (ErrorCode.none, 0)
    end = {"transactional_id": TXN_ID, "producer_id": pid, "producer_epoch": epoch, "committed": True}
    r = call(wire, ApiKey.END_TXN, 5, end)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (ErrorCode.none, pid, epoch + 1)
    # The old epoch's late write is fenced (INVALID_PRODUCER_EPOCH for a v12 producer too).
    late = call(wire, ApiKey.PRODUCE, 12, values).responses[0].partition_responses[0]
    assert late.error_code is ErrorCode.invalid_producer_epoch


def _produce_v12(wire: Dispatcher, records: bytes, partition: int = 0) -> Any:
    values = produce_values(TOPIC, partition, records)
    values["transactional_id"] = TXN_ID
    return call(wire, ApiKey.PRODUCE, 12, values).responses[0].partition_responses[0]


def test_a_v2_producer_new_to_a_partition_must_start_at_sequence_0(wire: Dispatcher) -> None:
    """Kafka 4.1's ProducerAppendInfo.checkSequence: a transactions-v2 producer with no batches in
    a partition is refused a non-zero first sequence (OUT_OF_ORDER_SEQUENCE_NUMBER, Kafka's message),
    nothing is written, and the same transaction then writes from sequence 0. A v1 producer (Produce
    v9 after AddPartitionsToTxn) is still accepted at any first sequence, as on Kafka."""
    pid, epoch = init(wire, version=5)
    refused = _produce_v12(wire, txn_batch(pid, epoch, 5, b"late"))
    assert refused.error_code is ErrorCode.out_of_order_sequence_number
    assert refused.error_message == (
        f"Invalid sequence number for producer {pid} at offset 0 in partition {TOPIC}-0: 5 (incoming seq. "
        "number). Expected sequence 0 for transactions v2 idempotent producer with no existing state."
    )
    first = _produce_v12(wire, txn_batch(pid, epoch, 0, b"v0"))
    assert (first.error_code, first.base_offset) == (ErrorCode.none, 0)
    second = _produce_v12(wire, txn_batch(pid, epoch, 1, b"v1"))
    assert (second.error_code, second.base_offset) == (ErrorCode.none, 1)
    # After the commit the epoch is bumped and the producer has no batches at it: sequence 0 again.
    end = {"transactional_id": TXN_ID, "producer_id": pid, "producer_epoch": epoch, "committed": True}
    bumped = call(wire, ApiKey.END_TXN, 5, end).producer_epoch
    assert _produce_v12(wire, txn_batch(pid, bumped, 2, b"x")).error_code is (
        ErrorCode.out_of_order_sequence_number
    )
    assert _produce_v12(wire, txn_batch(pid, bumped, 0, b"y")).error_code is ErrorCode.none


def test_a_v1_producer_new_to_a_partition_may_start_anywhere(wire: Dispatcher) -> None:
    pid, epoch = init(wire)
    assert add_partitions_v3(wire, pid, epoch, TOPIC, [0]) == {0: ErrorCode.none}
    assert produce(wire, txn_batch(pid, epoch, 5, b"v")).error_code is ErrorCode.none


def test_a_v2_producer_is_verified_with_verification_disabled(txn_broker: Broker) -> None:
    """Its partitions join the transaction only through Produce v12, so Kafka verifies (adds) them
    even with transaction.partition.verification.enable=false; the commit then writes the marker."""
    assert txn_broker.log_manager is not None and txn_broker.producer_ids is not None
    txn_broker.txn = TransactionCoordinator(
        txn_broker.log_manager,
        txn_broker.clock,
        txn_broker.producer_ids,
        TxnConfig(transaction_log_num_partitions=2, transaction_partition_verification_enable=False),
    )
    wire = Dispatcher(txn_broker)
    pid, epoch = init(wire, version=5)
    assert _produce_v12(wire, txn_batch(pid, epoch, 0, b"v0")).error_code is ErrorCode.none
    end = {"transactional_id": TXN_ID, "producer_id": pid, "producer_epoch": epoch, "committed": True}
    assert call(wire, ApiKey.END_TXN, 5, end).error_code is ErrorCode.none
    log = txn_broker.log_manager.get_log(TOPIC, 0)
    assert log.log_end_offset == 2  # the data batch and the commit marker


def test_the_fixed_features_accept_only_their_level(wire: Dispatcher) -> None:
    """metadata.version and group.version are served at one level: an update to it is a no-op, any
    other level is refused with Kafka's message for a level outside the supported range."""

    def update(feature: str, level: int, upgrade_type: int) -> Any:
        key = {"feature": feature, "max_version_level": level, "upgrade_type": upgrade_type}
        return call(wire, ApiKey.UPDATE_FEATURES, 1, {"timeout": 60_000, "feature_updates": [key]})

    assert update("metadata.version", 27, 1).error_code is ErrorCode.none
    refused = update("group.version", 0, 2)
    assert refused.error_code is ErrorCode.invalid_update_version
    assert refused.error_message == (
        "The update failed for all features since the following feature had an error: Invalid "
        "update version 0 for feature group.version. Local controller 0 only supports versions 1-1"
    )
    r = call(wire, ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert ("group.version", 1, 1) in [
        (f.name, f.min_version_level, f.max_version_level) for f in r.finalized_features
    ]
