"""A transactions-version-2 producer on the wire (KIP-890 part 2), for tests; version 1 too.

No Python Kafka client speaks transactions v2 (librdkafka 2.16 sends EndTxn v1 and
AddPartitionsToTxn v0, kafka-python and aiokafka stop at EndTxn v3): only Kafka's Java producer
does, which needs a JVM. This sends what the Java producer 4.1 sends once ApiVersions finalized
``transaction.version`` 2: InitProducerId, then per transaction Produce v12 (no
AddPartitionsToTxn: the partition joins the transaction with its first batch), TxnOffsetCommit v5
(no AddOffsetsToTxn) and EndTxn v5, whose answer carries the epoch (or the new producer id) of
the next transaction; sequences restart at 0 with every epoch. One record per batch, each
answered before the next is sent, as ``send(...).get()`` does.

With ``transaction_version=1`` it sends what the same producer sends when the broker finalized
``transaction.version`` 1: AddPartitionsToTxn v3 before a partition's first batch,
AddOffsetsToTxn v3 before TxnOffsetCommit v4, Produce v11 and EndTxn v4; the epoch stays and the
sequences run on across transactions.
"""

from __future__ import annotations

import time
from typing import Any

from kompakt.protocol.apis import ApiKey
from kompakt.protocol.client import Connection
from kompakt.protocol.codec import ErrorCode
from kompakt.records.builder import SimpleRecord, build_batch

_RETRIABLE = (
    ErrorCode.concurrent_transactions,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
)


class Tv2Error(AssertionError):
    """The broker answered an error the scenario does not expect."""


class Tv2Producer:
    """One transactional id over one connection to a single-node cluster."""

    def __init__(
        self,
        host: str,
        port: int,
        transactional_id: str,
        timeout_ms: int = 60_000,
        transaction_version: int = 2,
    ) -> None:
        self.v2 = transaction_version >= 2
        self._in_txn: set[tuple[str, int]] = set()
        self.conn = Connection(host, port, 20.0, client_id=f"producer-{transactional_id}")
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.producer_id = -1
        self.epoch = -1
        self._sequences: dict[tuple[str, int], int] = {}
        self._started = False

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Tv2Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def finalized_transaction_version(self) -> int:
        r = self.conn.call(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "tv2", "client_software_version": "1"}
        )
        levels = {f.name: int(f.max_version_level) for f in r.finalized_features}
        return levels.get("transaction.version", 0)

    def _retrying(self, api_key: int, version: int, values: dict[str, Any], error_of: Any) -> Any:
        """Retry CONCURRENT_TRANSACTIONS / COORDINATOR_LOAD_IN_PROGRESS as the Java client does."""
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            response = self.conn.call(api_key, version, values)
            error = error_of(response)
            if error not in _RETRIABLE:
                return response
            time.sleep(0.05)
        raise Tv2Error(f"{api_key} kept answering {error}")

    def init(self) -> None:
        """FindCoordinator (which creates ``__transaction_state`` on first use), InitProducerId."""
        self._retrying(
            ApiKey.FIND_COORDINATOR,
            4,
            {"key_type": 1, "coordinator_keys": [self.transactional_id]},
            lambda r: r.coordinators[0].error_code,
        )
        r = self._retrying(
            ApiKey.INIT_PRODUCER_ID,
            5,
            {
                "transactional_id": self.transactional_id,
                "transaction_timeout": self.timeout_ms,
                "producer_id": -1,
                "producer_epoch": -1,
            },
            lambda r: r.error_code,
        )
        if r.error_code is not ErrorCode.none:
            raise Tv2Error(f"InitProducerId: {r.error_code.name}")
        self.producer_id, self.epoch = int(r.producer_id), int(r.producer_epoch)
        self._sequences.clear()

    def send(self, topic: str, partition: int, key: bytes, value: bytes) -> int:
        """Produce v12 of one transactional record (v11 after AddPartitionsToTxn v3 with version 1);
        its offset."""
        if not self.v2 and (topic, partition) not in self._in_txn:
            values_add = {
                "v3_and_below_transactional_id": self.transactional_id,
                "v3_and_below_producer_id": self.producer_id,
                "v3_and_below_producer_epoch": self.epoch,
                "v3_and_below_topics": [{"name": topic, "partitions": [partition]}],
            }
            added = self._retrying(
                ApiKey.ADD_PARTITIONS_TO_TXN,
                3,
                values_add,
                lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
            )
            code = added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            if code is not ErrorCode.none:
                raise Tv2Error(f"AddPartitionsToTxn: {code.name}")
            self._in_txn.add((topic, partition))
        seq = self._sequences.get((topic, partition), 0)
        batch = build_batch(
            # the time of sending, as a client stamps it (a record at time 0 would make both
            # Kafka and kompakt roll the segment at the next marker, stamped with the real time)
            [SimpleRecord(key, value, int(time.time() * 1000))],
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=seq,
            is_transactional=True,
        )
        values = {
            "transactional_id": self.transactional_id,
            "acks": -1,
            "timeout": 30_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
        }
        r = self._retrying(
            ApiKey.PRODUCE,
            12 if self.v2 else 11,
            values,
            lambda r: r.responses[0].partition_responses[0].error_code,
        )
        answer = r.responses[0].partition_responses[0]
        if answer.error_code is not ErrorCode.none:
            raise Tv2Error(f"Produce: {answer.error_code.name} {answer.error_message}")
        self._sequences[(topic, partition)] = seq + 1
        self._started = True
        return int(answer.base_offset)

    def send_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        """TxnOffsetCommit v5, a simple commit (generation -1, no member), no AddOffsetsToTxn.
        FindCoordinator first, as the Java client does (it creates ``__consumer_offsets``)."""
        self._retrying(
            ApiKey.FIND_COORDINATOR,
            4,
            {"key_type": 0, "coordinator_keys": [group]},
            lambda r: r.coordinators[0].error_code,
        )
        if not self.v2:
            values_add = {
                "transactional_id": self.transactional_id,
                "producer_id": self.producer_id,
                "producer_epoch": self.epoch,
                "group_id": group,
            }
            added = self._retrying(ApiKey.ADD_OFFSETS_TO_TXN, 3, values_add, lambda r: r.error_code)
            if added.error_code is not ErrorCode.none:
                raise Tv2Error(f"AddOffsetsToTxn: {added.error_code.name}")
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
            )
        values = {
            "transactional_id": self.transactional_id,
            "group_id": group,
            "producer_id": self.producer_id,
            "producer_epoch": self.epoch,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        r = self._retrying(
            ApiKey.TXN_OFFSET_COMMIT,
            5 if self.v2 else 4,
            values,
            lambda r: r.topics[0].partitions[0].error_code,
        )
        errors = {p.error_code for t in r.topics for p in t.partitions}
        if errors != {ErrorCode.none}:
            raise Tv2Error(f"TxnOffsetCommit: {sorted(e.name for e in errors)}")
        self._started = True

    def end(self, commit: bool) -> tuple[int, int]:
        """EndTxn v5; the producer id and epoch it answers, which the next transaction uses.

        A transaction that sent nothing is not ended on the wire, as the Java producer skips it.
        """
        if not self._started:
            return self.producer_id, self.epoch
        values = {
            "transactional_id": self.transactional_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.epoch,
            "committed": commit,
        }
        r = self._retrying(ApiKey.END_TXN, 5 if self.v2 else 4, values, lambda r: r.error_code)
        if r.error_code is not ErrorCode.none:
            raise Tv2Error(f"EndTxn: {r.error_code.name}")
        self._started = False
        self._in_txn.clear()
        if not self.v2:
            return self.producer_id, self.epoch
        if int(r.producer_id) != self.producer_id or int(r.producer_epoch) != self.epoch:
            self._sequences.clear()
        self.producer_id, self.epoch = int(r.producer_id), int(r.producer_epoch)
        self._started = False
        return self.producer_id, self.epoch


def run_java_scenario(
    host: str, port: int, topic: str, transactional_id: str, group: str, transaction_version: int = 2
) -> None:
    """``tests/fixtures_src/TxnDiff.java``'s producer half, request for request."""
    with Tv2Producer(host, port, transactional_id, transaction_version=transaction_version) as producer:
        producer.init()
        n = 0
        for t in range(6):
            for i in range(3):
                producer.send(topic, 0, f"k{n % 4}".encode(), f"t{t}-{i}".encode())
                n += 1
            if t == 3:
                producer.send_offsets(group, {(topic, 0): n})
            producer.end(commit=t not in (2, 4))
        producer.end(commit=False)  # the empty transaction: nothing on the wire
