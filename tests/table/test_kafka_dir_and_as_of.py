"""Offline tables over a log directory Apache Kafka 4.1.2 wrote, and ``--as-of`` answers.

The fixture (``tests/log/fixtures/kafka41_compacted``, see its README) holds the same partition
before and after Kafka's own cleaner compacted it: 420 records over 40 keys, every 17th a
tombstone, timestamps 10 ms apart with every 13th 5 s early.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from kompakt.records.batch import iter_batches
from kompakt.records.record import decode_records
from kompakt.table.offline import open_tables
from kompakt.testing import InProcessBroker

from .table_helpers import TOPIC, CliResult, produce

Records = list[tuple[int, int, bytes, bytes | None]]


def _records(directory: Path) -> Records:
    out: Records = []
    for segment in sorted(directory.glob("fixture-0/*.log")):
        for batch in iter_batches(segment.read_bytes()):
            out.extend((r.offset, r.timestamp, r.key or b"", r.value) for r in decode_records(batch))
    return out


def _state(records: Records, cut: int | None = None) -> dict[bytes, bytes]:
    latest: dict[bytes, bytes | None] = {}
    for offset, _ts, key, value in records:
        if cut is None or offset < cut:
            latest[key] = value
    return {k: v for k, v in latest.items() if v is not None}


def test_kafka_written_directory_before_and_after_its_clean(
    kafka_dirs: dict[str, Path], cli: Callable[..., CliResult]
) -> None:
    before = _records(kafka_dirs["before"])
    expected = _state(before)
    assert len(before) == 420 and len(expected) == 37
    for name in ("before", "after"):
        (table,) = open_tables(kafka_dirs[name])
        assert {r.key: r.value for r in table.scan()} == expected, name
        for key in {k for _o, _t, k, _v in before}:
            got = table.get(key)
            assert (None if got is None else got.value) == expected.get(key), (name, key)
        counts = table.counts()
        assert (counts.live_keys, counts.tombstones) == (37, 3)
    got = cli("table", "diff", str(kafka_dirs["before"]), str(kafka_dirs["after"]), "--topic", "fixture")
    assert got.code == 0, got.out + got.err
    assert "equal: A has 37 live keys, B 37" in got.out
    key = next(iter(expected)).decode()
    got = cli("table", "get", "fixture", key, "--log-dir", str(kafka_dirs["after"]), "-o", "json")
    data = json.loads(got.out)
    assert (got.code, data["value"], data["location"]["section"]) == (
        0,
        expected[key.encode()].decode(),
        "clean",
    )


def test_as_of_on_the_kafka_directory(kafka_dirs: dict[str, Path], cli: Callable[..., CliResult]) -> None:
    records = _records(kafka_dirs["before"])
    ts_100 = next(ts for offset, ts, _k, _v in records if offset == 100)
    cut = min(offset for offset, ts, _k, _v in records if ts > ts_100)
    (before,) = open_tables(kafka_dirs["before"])
    index, info = before.as_of(ts_100)
    assert (info.cut_offset, info.complete, info.reason) == (cut, True, None)
    assert {r.key: r.value for r in before.scan(index=index, end_offset=info.last_stable_offset)} == _state(
        records, cut
    )
    # the compacted copy no longer holds the values of that time, and says so
    (after,) = open_tables(kafka_dirs["after"])
    _index, info = after.as_of(ts_100)
    assert info.complete is False
    assert info.reason is not None and "a value current at" in info.reason
    got = cli("table", "scan", "fixture", "--as-of", str(ts_100), "--log-dir", str(kafka_dirs["after"]))
    assert got.code == 0 and "note: the answer may be incomplete" in got.out
    got = cli(
        "table",
        "scan",
        "fixture",
        "--as-of",
        str(ts_100),
        "--log-dir",
        str(kafka_dirs["before"]),
        "-o",
        "json",
    )
    assert {json.loads(line)["key"] for line in got.out.splitlines()} == {
        k.decode() for k in _state(records, cut)
    }


def test_as_of_over_http(broker: InProcessBroker, cli: Callable[..., CliResult]) -> None:
    base = 1_700_000_000_000
    produce(broker.bootstrap_servers, TOPIC, [(b"k", b"old")], partition=0, timestamp=base)
    produce(broker.bootstrap_servers, TOPIC, [(b"k", b"new")], partition=0, timestamp=base + 10_000)
    url = broker.admin_url
    got = cli(
        "table",
        "get",
        TOPIC,
        "k",
        "--partition",
        "0",
        "--as-of",
        str(base + 5_000),
        "--admin-url",
        url,
        "-o",
        "json",
    )
    data = json.loads(got.out)
    assert (got.code, data["value"], data["as_of"]["complete"]) == (0, "old", True)
    got = cli(
        "table", "get", TOPIC, "k", "--partition", "0", "--as-of", "2023-11-14T22:13:30Z", "--admin-url", url
    )
    assert got.code == 0 and "new" in got.out
    got = cli("table", "get", TOPIC, "k", "--partition", "0", "--as-of", str(base - 1), "--admin-url", url)
    assert got.code == 1 and "is not in tbl-0" in got.err
    broker.roll(TOPIC)
    broker.compact_now(TOPIC)
    got = cli(
        "table",
        "get",
        TOPIC,
        "k",
        "--partition",
        "0",
        "--as-of",
        str(base + 5_000),
        "--admin-url",
        url,
        "-o",
        "json",
    )
    data = json.loads(got.out)
    assert data["as_of"]["complete"] is False
    assert "cleaned up to offset 2" in data["as_of"]["reason"]
    assert cli("table", "get", TOPIC, "k", "--as-of", "yesterday", "--admin-url", url).code == 2
