"""Table operations over the partitions of one topic, as JSON data: lookups, scan pages, counts.

The admin endpoint (live tables), ``kompakt table … --log-dir`` (offline tables) and ``kompakt
table … kafka://HOST:PORT/TOPIC`` (a topic read by a consumer, :mod:`kompakt.table.cluster`) call
the same functions, so all three answer alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final, Protocol

from kompakt.table.index import KeyIndex
from kompakt.table.partition import AsOfInfo, Counts, Lookup
from kompakt.table.partitioner import PARTITIONERS, partition_for
from kompakt.table.records import TableRecord
from kompakt.table.views import ArgumentError, lookup_json, record_json

#: Search every partition (what an offline directory does by default: it may not hold them all).
ANY_PARTITION: Final = "any"
DEFAULT_PAGE: Final = 1000
MAX_PAGE: Final = 10_000


class TableSource(Protocol):
    """What the operations read of one partition: a
    :class:`~kompakt.table.partition.PartitionTable` (live or on disk) or a partition of a topic on
    a cluster (:class:`~kompakt.table.cluster.ClusterPartition`)."""

    @property
    def partition(self) -> int: ...

    def lookup(self, key: bytes) -> Lookup: ...

    def lookup_as_of(self, key: bytes, as_of_ms: int) -> tuple[Lookup, AsOfInfo]: ...

    def as_of(self, as_of_ms: int) -> tuple[KeyIndex, AsOfInfo]: ...

    def counts(self) -> Counts: ...

    def scan(
        self,
        *,
        prefix: bytes = b"",
        include_tombstones: bool = False,
        from_offset: int = 0,
        index: KeyIndex | None = None,
        end_offset: int | None = None,
    ) -> Iterator[TableRecord]: ...


def _by_partition(tables: Sequence[TableSource]) -> dict[int, TableSource]:
    return {t.partition: t for t in tables}


def choose_partitions(
    tables: Sequence[TableSource],
    key: bytes,
    partition: int | None,
    partitioner: str,
    partition_count: int,
) -> list[TableSource]:
    """The tables a lookup of ``key`` reads: the one given, the partitioner's, or all of them."""
    by = _by_partition(tables)
    if partition is None and partitioner == ANY_PARTITION:
        return [by[p] for p in sorted(by)]
    if partition is None:
        if partitioner not in PARTITIONERS:
            raise ArgumentError(
                f"unknown partitioner {partitioner!r} (expected {', '.join(PARTITIONERS)} or {ANY_PARTITION})"
            )
        partition = partition_for(key, partition_count, partitioner)
    table = by.get(partition)
    if table is None:
        raise LookupError(
            f"partition {partition} is not here (have {', '.join(map(str, sorted(by))) or 'none'})"
        )
    return [table]


def lookup(
    topic: str,
    tables: Sequence[TableSource],
    key: bytes,
    *,
    partition: int | None = None,
    partitioner: str = "murmur2",
    partition_count: int | None = None,
    as_of_ms: int | None = None,
) -> dict[str, Any]:
    """The answer for one key; ``found`` says whether it has a live value."""
    count = (
        partition_count if partition_count is not None else max((t.partition for t in tables), default=-1) + 1
    )
    chosen = choose_partitions(tables, key, partition, partitioner, count)
    answers: list[tuple[TableSource, Lookup, AsOfInfo | None]] = []
    for table in chosen:
        if as_of_ms is None:
            answers.append((table, table.lookup(key), None))
        else:
            answers.append((table, *table.lookup_as_of(key, as_of_ms)))
    hits = [a for a in answers if a[1].record is not None]
    # Several partitions know the key only when it was produced with different partitioners:
    # the newest record wins, and the others are listed.
    hits.sort(key=lambda a: (a[1].record.timestamp if a[1].record else -1))
    table, found, _info = hits[-1] if hits else answers[0]
    out = lookup_json(topic, table.partition, key, found)
    out["partitioner"] = "given" if partition is not None else partitioner
    if len(hits) > 1:
        out["also_in_partitions"] = [a[0].partition for a in hits[:-1]]
    if as_of_ms is not None:
        out["as_of"] = _merge_as_of([a[2] for a in answers if a[2] is not None])
    return out


def _merge_as_of(infos: Sequence[AsOfInfo]) -> dict[str, Any]:
    complete = all(i.complete for i in infos)
    reasons = sorted({i.reason for i in infos if i.reason})
    first = infos[0]
    out = first.to_json() if len(infos) == 1 else {"as_of_ms": first.as_of_ms}
    out["complete"] = complete
    out["reason"] = "; ".join(reasons) if reasons else None
    return out


def iter_rows(
    tables: Sequence[TableSource],
    *,
    prefix: bytes = b"",
    include_tombstones: bool = False,
    from_partition: int = 0,
    from_offset: int = 0,
    as_of_ms: int | None = None,
    infos: list[tuple[int, AsOfInfo]] | None = None,
) -> Iterator[TableRecord]:
    """Every key's latest record, partition by partition in offset order, from a cursor."""
    for table in sorted(tables, key=lambda t: t.partition):
        if table.partition < from_partition:
            continue
        start = from_offset if table.partition == from_partition else 0
        index: KeyIndex | None = None
        end: int | None = None
        if as_of_ms is not None:
            index, info = table.as_of(as_of_ms)
            end = info.last_stable_offset
            if infos is not None:
                infos.append((table.partition, info))
        yield from table.scan(
            prefix=prefix,
            include_tombstones=include_tombstones,
            from_offset=start,
            index=index,
            end_offset=end,
        )


def scan_page(
    topic: str,
    tables: Sequence[TableSource],
    *,
    prefix: bytes = b"",
    include_tombstones: bool = False,
    from_partition: int = 0,
    from_offset: int = 0,
    limit: int = DEFAULT_PAGE,
    as_of_ms: int | None = None,
) -> dict[str, Any]:
    """Up to ``limit`` rows and the cursor of the next page (null after the last one).

    Each page reads the log as it is then: a key written between two pages may appear again on a
    later page with its newer value (the last row of a key is its latest), never not at all.
    """
    if not 1 <= limit <= MAX_PAGE:
        raise ArgumentError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
    rows: list[dict[str, Any]] = []
    infos: list[tuple[int, AsOfInfo]] = []
    next_cursor: dict[str, int] | None = None
    for record in iter_rows(
        tables,
        prefix=prefix,
        include_tombstones=include_tombstones,
        from_partition=from_partition,
        from_offset=from_offset,
        as_of_ms=as_of_ms,
        infos=infos,
    ):
        if len(rows) == limit:
            next_cursor = {"partition": record.partition, "offset": record.offset}
            break
        rows.append(record_json(record))
    out: dict[str, Any] = {"topic": topic, "rows": rows, "next": next_cursor}
    if as_of_ms is not None and infos:
        out["as_of"] = _merge_as_of([i for _, i in infos])
    return out


def counts(topic: str, tables: Sequence[TableSource]) -> dict[str, Any]:
    """Live keys and tombstones per partition, the totals, and the index memory."""
    parts = [t.counts().to_json() for t in sorted(tables, key=lambda t: t.partition)]
    live = sum(int(p["live_keys"]) for p in parts)
    tombs = sum(int(p["tombstones"]) for p in parts)
    memory = sum(int(p["index_bytes"]) for p in parts)
    keys = live + tombs
    return {
        "topic": topic,
        "partitions": parts,
        "live_keys": live,
        "tombstones": tombs,
        "index_bytes": memory,
        "bytes_per_key": round(memory / keys, 2) if keys else None,
    }
