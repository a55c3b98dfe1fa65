"""Backup and restore at the fetch rate (issue 33): batches go between the cluster and the backup
as they are, transactions keep their meaning, and a backup made before the change restores."""

from __future__ import annotations

import base64
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kompakt.backup.backup import run_backup
from kompakt.backup.manifest import load_manifest
from kompakt.backup.offline import run_offline_restore
from kompakt.backup.restore import ORIGINAL_OFFSET_HEADER, run_restore
from kompakt.backup.storage import FilesystemStorage
from kompakt.records.batch import RecordBatchView, iter_batches
from kompakt.records.compression import Compression
from kompakt.records.record import decode_records
from tests.support.serve import BrokerProcess

from .conftest import DEADLINE_S, Rec, backup_config, consume_all, create_topic, restore_config

pytestmark = [pytest.mark.clients, pytest.mark.xdist_group("backup")]

FIXTURE = Path(__file__).parent / "fixtures" / "v1-backup"
Layout = list[tuple[int, int, int, int]]


def _log_batches(data_dir: Path, topic: str, partition: int) -> list[RecordBatchView]:
    """Every batch of a partition's segment files (of a running broker: what it has written)."""
    out: list[RecordBatchView] = []
    for segment in sorted((data_dir / f"{topic}-{partition}").glob("*.log")):
        out.extend(iter_batches(segment.read_bytes()))
    return out


def _backup_batches(root: Path, backup_id: str, topic: str, partition: int) -> list[RecordBatchView]:
    entry = load_manifest(FilesystemStorage(root), backup_id).partitions[(topic, partition)]
    return [b for f in entry.files for b in iter_batches((root / backup_id / f.path).read_bytes())]


def _but_epoch(batch: RecordBatchView) -> bytes:
    """A batch's bytes without its partition leader epoch (outside the CRC)."""
    return bytes(batch.raw[:12]) + bytes(batch.raw[16:])


def _layout(batches: list[RecordBatchView], *, relative: bool = False) -> Layout:
    """Each batch's offsets (or its offset span), record count and codec."""
    return [
        (0 if relative else b.base_offset, b.last_offset_delta, b.records_count, b.compression)
        for b in batches
        if not b.is_control
    ]


def test_batches_are_stored_and_restored_as_the_producer_wrote_them(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    create_topic(broker, "raw-src", 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4", "linger.ms": 50})
    for burst in range(3):  # a flush per burst: at least one batch of lz4 per burst and partition
        for i in range(40):
            producer.produce(
                "raw-src", key=b"k%d" % i, value=b"value %d %d " % (burst, i) * 20, partition=i % 2
            )
        assert producer.flush(15) == 0
    source = {p: _log_batches(broker.data_dir, "raw-src", p) for p in (0, 1)}
    assert all(len(source[p]) >= 3 for p in (0, 1))

    result = run_backup(
        backup_config(
            broker,
            tmp_path,
            "raw",
            topics=["raw-src"],
            backup={"compression": "zstd", "max_concurrent_partitions": 2},
        )
    )
    assert result.manifest.status == "complete" and result.run.records == 120
    for p in (0, 1):
        stored = _backup_batches(tmp_path, "raw", "raw-src", p)
        # The producer's batches at their offsets, lz4 as it sent them (not re-encoded into zstd).
        assert _layout(stored) == _layout(source[p])
        assert {b.compression for b in stored} == {Compression.LZ4}
        assert [bytes(b.records_section) for b in stored] == [bytes(b.records_section) for b in source[p]]
        assert all(b.producer_id == -1 and b.partition_leader_epoch == -1 for b in stored)

    run_restore(restore_config(broker, tmp_path, "raw", restore={"topic_mapping": {"raw-src": "raw-dst"}}))
    for p in (0, 1):
        restored = _log_batches(broker.data_dir, "raw-dst", p)
        # Produced as stored: the same batches (new offsets), still lz4.
        assert _layout(restored, relative=True) == _layout(source[p], relative=True)
        assert [(r.key, r.value) for r in consume_all(broker, "raw-dst", p)] == [
            (r.key, r.value) for r in consume_all(broker, "raw-src", p)
        ]


def _transactions(broker: BrokerProcess, topic: str) -> None:
    txn = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic}-txn", "linger.ms": 5}
    )
    txn.init_transactions(10)
    for commit, tag in ((True, b"kept"), (False, b"aborted"), (True, b"kept-2")):
        txn.begin_transaction()
        for i in range(5):
            txn.produce(topic, key=b"t%d" % i, value=tag, partition=0)
        txn.flush(10)  # written before the abort, so the log holds aborted records
        (txn.commit_transaction if commit else txn.abort_transaction)(10)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, key=b"plain", value=b"after", partition=0)
    assert plain.flush(10) == 0


def _read(bootstrap: str, topic: str, isolation: str) -> list[tuple[bytes | None, bytes | None]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[bytes | None, bytes | None]] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline:
            msg: Any = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == -191, msg.error()
                return out
            out.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    raise AssertionError("did not reach the end of the partition")


def test_transactions_round_trip_on_the_fast_path(broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker, "txn-src", 1)
    _transactions(broker, "txn-src")
    committed = consume_all(broker, "txn-src")
    assert [r.value for r in committed] == [b"kept"] * 5 + [b"kept-2"] * 5 + [b"after"]
    source = [b for b in _log_batches(broker.data_dir, "txn-src", 0) if not b.is_control]

    result = run_backup(
        backup_config(broker, tmp_path, "txn", topics=["txn-src"], backup={"compression": "none"})
    )
    entry = result.manifest.partitions[("txn-src", 0)]
    # Markers (5, 11, 17) and the aborted records (6-10) are gaps; the rest is stored.
    assert (entry.records, entry.end_offset, entry.gaps) == (11, 19, [[5, 11], [17, 17]])
    stored = _backup_batches(tmp_path, "txn", "txn-src", 0)
    assert not any(b.is_transactional or b.is_control or b.producer_id >= 0 for b in stored)
    # The committed batches as the producer wrote them (the aborted one left out).
    kept = [b for b in source if b.base_offset not in range(6, 11)]
    assert _layout(stored) == _layout(kept)
    assert [bytes(b.records_section) for b in stored] == [bytes(b.records_section) for b in kept]

    run_restore(restore_config(broker, tmp_path, "txn", restore={"topic_mapping": {"txn-src": "txn-dst"}}))
    want = [(r.key, r.value) for r in committed]
    # Aborted data is not invisible but gone: even a read_uncommitted reader does not see it.
    assert _read(broker.bootstrap, "txn-dst", "read_committed") == want
    assert _read(broker.bootstrap, "txn-dst", "read_uncommitted") == want

    data_dir = tmp_path / "offline"
    run_offline_restore(restore_config(None, tmp_path, "txn", data_dir=data_dir))
    records = [
        (r.offset, r.key, r.value) for b in _log_batches(data_dir, "txn-src", 0) for r in decode_records(b)
    ]
    assert records == [(r.offset, r.key, r.value) for r in committed]
    assert _log_batches(data_dir, "txn-src", 0)[-1].last_offset == 18  # ends where the source ended


def _expected(name: str) -> list[Rec]:
    raw = json.loads((FIXTURE / "expected.json").read_text())["partitions"][name]

    def b(text: str | None) -> bytes | None:
        return None if text is None else base64.b64decode(text)

    return [Rec(o, t, b(k), b(v), tuple((hk, b(hv)) for hk, hv in h)) for o, t, k, v, h in raw]


def test_a_backup_made_before_issue_33_restores(broker: BrokerProcess, tmp_path: Path) -> None:
    """``fixtures/v1-backup`` was written by the backup of commit bd3b2f8 (``make_v1_backup.py``)."""
    shutil.copytree(FIXTURE / "v1", tmp_path / "v1")
    mapping = {"fx-compact": "old-compact", "fx-plain": "old-plain", "fx-txn": "old-txn"}
    run_restore(
        restore_config(
            broker,
            tmp_path,
            "v1",
            restore={
                "topic_mapping": mapping,
                "record_original_offsets": True,
                "consumer_groups": "snapshot",
            },
        )
    )
    for source, partitions in (("fx-compact", 1), ("fx-plain", 2), ("fx-txn", 1)):
        for p in range(partitions):
            want = _expected(f"{source}-{p}")
            got = consume_all(broker, mapping[source], p)
            assert [(r.key, r.value, r.timestamp) for r in got] == [
                (r.key, r.value, r.timestamp) for r in want
            ]
            assert [dict(r.headers)[ORIGINAL_OFFSET_HEADER] for r in got] == [
                str(r.offset).encode() for r in want
            ]
            assert [[h for h in r.headers if h[0] != ORIGINAL_OFFSET_HEADER] for r in got] == [
                list(r.headers) for r in want
            ]
    # The group resumes at the record it had committed (offset 47 of the source).
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fx-group"})
    try:
        (tp,) = consumer.committed([TopicPartition("old-compact", 0)], timeout=10)
    finally:
        consumer.close()
    resumed = next(r for r in consume_all(broker, "old-compact") if r.offset == tp.offset)
    assert int(dict(resumed.headers)[ORIGINAL_OFFSET_HEADER]) == min(
        r.offset for r in _expected("fx-compact-0") if r.offset >= 47
    )

    data_dir = tmp_path / "offline"
    outcome = run_offline_restore(restore_config(None, tmp_path, "v1", data_dir=data_dir))
    ends = {(row["topic"], row["partition"]): row["log_end_offset"] for row in outcome.partitions}
    assert ends == {("fx-compact", 0): 55, ("fx-plain", 0): 23, ("fx-plain", 1): 23, ("fx-txn", 0): 19}
    for source, partitions in (("fx-compact", 1), ("fx-plain", 2), ("fx-txn", 1)):
        for p in range(partitions):
            got = [
                (r.offset, r.timestamp, r.key, r.value, r.headers)
                for b in _log_batches(data_dir, source, p)
                for r in decode_records(b)
            ]
            assert got == [
                (r.offset, r.timestamp, r.key, r.value, r.headers) for r in _expected(f"{source}-{p}")
            ]


def test_a_zstd_backup_restores_the_batches_it_compressed_as_the_source_had_them(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    """Issue 33: the backup compresses the batches the producer did not; a restore gives those back
    as the source had them (the broker has nothing to decompress), while the producer's own zstd
    and lz4 batches stay as the producer sent them."""
    create_topic(broker, "mix-src", 1)
    producers = [
        Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, **codec})
        for codec in ({}, {"compression.type": "zstd"}, {"compression.type": "lz4"})
    ]
    for burst in range(3):  # a flush per producer and burst: batches of each kind, interleaved
        for n, producer in enumerate(producers):
            for i in range(30):
                headers = [("n", b"%d" % i)] if i % 3 else None
                value = None if i == 7 else b"" if i == 8 else b"value %d %d %d " % (burst, n, i) * 20
                producer.produce("mix-src", key=b"k%d" % i, value=value, headers=headers, partition=0)
            assert producer.flush(15) == 0
    source = _log_batches(broker.data_dir, "mix-src", 0)
    codecs = [b.compression for b in source]
    assert codecs.count(Compression.NONE) >= 3 and {Compression.ZSTD, Compression.LZ4} <= set(codecs)

    run_backup(backup_config(broker, tmp_path, "mix", topics=["mix-src"], backup={"compression": "zstd"}))
    stored = _backup_batches(tmp_path, "mix", "mix-src", 0)
    # Stored: every batch compressed, the producer's with its own codec.
    assert [b.compression for b in stored] == [c or Compression.ZSTD for c in codecs]

    # acks=1 restores without a producer id, as these producers wrote: the restored partition is
    # the source's, byte for byte, offsets included, but for the partition leader epoch (outside
    # the CRC: librdkafka sends 0, the restore -1, and the broker keeps what it is sent).
    restore = {"topic_mapping": {"mix-src": "mix-dst"}, "produce_acks": 1}
    run_restore(restore_config(broker, tmp_path, "mix", restore=restore))
    assert [_but_epoch(b) for b in _log_batches(broker.data_dir, "mix-dst", 0)] == [
        _but_epoch(b) for b in source
    ]

    # The default, idempotent restore: the same batches, under the restore's producer id.
    run_restore(restore_config(broker, tmp_path, "mix", restore={"topic_mapping": {"mix-src": "mix-idem"}}))
    restored = _log_batches(broker.data_dir, "mix-idem", 0)
    assert [(b.attributes, bytes(b.records_section)) for b in restored] == [
        (b.attributes, bytes(b.records_section)) for b in source
    ]
    assert restored[0].producer_id >= 0
    assert [r.producer_id for r in restored] == [restored[0].producer_id] * len(source)

    # The offline restore writes them as the source had them too.
    data_dir = tmp_path / "offline"
    run_offline_restore(restore_config(None, tmp_path, "mix", data_dir=data_dir))
    assert [_but_epoch(b) for b in _log_batches(data_dir, "mix-src", 0)] == [_but_epoch(b) for b in source]
    del producers
