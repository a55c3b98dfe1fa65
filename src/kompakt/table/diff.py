"""``kompakt table diff``: do two sources hold the same table (key -> latest value)?

A source is reduced to its *state*: per partition and key, the digest of the latest live value
(tombstoned keys are absent), with the key bytes kept for the report. Offsets, batch layout,
compaction progress, gaps, timestamps and headers are not compared: a mirror, a restore, a
backup and the compacted original hold the same state while all of those differ.

Log directories and backups are read with the native kernels (no Python object per record);
a topic on a cluster is read by a ``read_committed`` consumer (confluent-kafka) from the start
to the last stable offset, one message at a time, as any client would.

``by_key`` compares keys across partitions (a mirror with another partition count); a key live
in several partitions of one source then counts once, with the newest record.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kompakt.cleaner.kernels.hashing import hash_key, hash_keys
from kompakt.errors import OperatorError
from kompakt.table.kernels import gather
from kompakt.table.partition import PartitionTable
from kompakt.table.views import b64, text_or_none

log = logging.getLogger(__name__)

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]


class DiffSourceError(OperatorError):
    """A diff source that cannot be read (unreachable cluster, unknown topic, bad path)."""


@dataclass(frozen=True, slots=True)
class State:
    """One source's table: row i is partition ``partition[i]``, key digest ``(hi[i], lo[i])``, value
    digest ``(vhi[i], vlo[i])``; its key is ``key_data[key_offsets[i]:key_offsets[i + 1]]``."""

    name: str
    partition: I64
    hi: U64
    lo: U64
    vhi: U64
    vlo: U64
    timestamp: I64
    key_offsets: I64
    key_data: npt.NDArray[np.uint8]
    partitions: int

    def __len__(self) -> int:
        return len(self.hi)

    def key(self, i: int) -> bytes:
        return self.key_data[self.key_offsets[i] : self.key_offsets[i + 1]].tobytes()


def _concat(parts: Sequence[npt.NDArray[Any]], dtype: Any) -> npt.NDArray[Any]:
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


def state_of_tables(name: str, tables: Iterable[PartitionTable]) -> State:
    """The state of live or offline tables (their scans), natively."""
    cols: dict[str, list[npt.NDArray[Any]]] = {
        k: [] for k in ("p", "hi", "lo", "vhi", "vlo", "ts", "kl", "kd")
    }
    count = 0
    for table in tables:
        count += 1
        for run, rows in table.scan_runs():
            rec = run.records
            vhi, vlo = hash_keys(run.buf, rec.value_start[rows], rec.value_len[rows])
            key_offsets, key_data = gather(run.buf, rec.key_start[rows], rec.key_len[rows])
            cols["p"].append(np.full(len(rows), table.partition, dtype=np.int64))
            cols["hi"].append(run.hi[rows].copy())
            cols["lo"].append(run.lo[rows].copy())
            cols["vhi"].append(vhi.copy())
            cols["vlo"].append(vlo.copy())
            cols["ts"].append(run.timestamp[rows].copy())
            cols["kl"].append(np.diff(key_offsets))
            cols["kd"].append(key_data)
    return _state(name, cols, count)


def _state(name: str, cols: dict[str, list[npt.NDArray[Any]]], partitions: int) -> State:
    lengths = _concat(cols["kl"], np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return State(
        name,
        _concat(cols["p"], np.int64),
        _concat(cols["hi"], np.uint64),
        _concat(cols["lo"], np.uint64),
        _concat(cols["vhi"], np.uint64),
        _concat(cols["vlo"], np.uint64),
        _concat(cols["ts"], np.int64),
        offsets,
        _concat(cols["kd"], np.uint8),
        partitions,
    )


def state_of_records(name: str, latest: dict[tuple[int, bytes], tuple[bytes, int]], partitions: int) -> State:
    """The state of ``(partition, key) -> (live value, timestamp)`` collected by a client."""
    items = sorted(latest.items())
    n = len(items)
    hi = np.empty(n, dtype=np.uint64)
    lo = np.empty(n, dtype=np.uint64)
    vhi = np.empty(n, dtype=np.uint64)
    vlo = np.empty(n, dtype=np.uint64)
    for i, ((_, key), (value, _ts)) in enumerate(items):
        hi[i], lo[i] = hash_key(key)
        vhi[i], vlo[i] = hash_key(value)
    keys = [key for (_, key), _ in items]
    cols: dict[str, list[npt.NDArray[Any]]] = {
        "p": [np.array([p for (p, _), _ in items], dtype=np.int64)],
        "hi": [hi],
        "lo": [lo],
        "vhi": [vhi],
        "vlo": [vlo],
        "ts": [np.array([ts for _, (_, ts) in items], dtype=np.int64)],
        "kl": [np.array([len(k) for k in keys], dtype=np.int64)],
        "kd": [np.frombuffer(b"".join(keys), dtype=np.uint8)],
    }
    return _state(name, cols, partitions)


def state_of_cluster(
    bootstrap: str, topic: str, *, timeout_s: float = 30.0, config: dict[str, str] | None = None
) -> State:
    """Read ``topic`` from the start with a read_committed consumer up to its last stable offset."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kompakt-table-diff-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "socket.connection.setup.timeout.ms": int(timeout_s * 1000),
            **(config or {}),
        }
    )
    try:
        try:
            meta = consumer.list_topics(topic, timeout=timeout_s)
        except KafkaException as exc:
            raise DiffSourceError(f"cannot read the metadata of {topic!r} at {bootstrap}: {exc}") from None
        tmeta = meta.topics.get(topic)
        if tmeta is None or tmeta.error is not None or not tmeta.partitions:
            why = tmeta.error if tmeta is not None and tmeta.error is not None else "unknown topic"
            raise DiffSourceError(f"topic {topic!r} at {bootstrap}: {why}")
        partitions = sorted(tmeta.partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        latest: dict[tuple[int, bytes], tuple[bytes, int]] = {}
        pending = set(partitions)
        deadline = time.monotonic() + timeout_s
        while pending:
            messages = consumer.consume(num_messages=10_000, timeout=0.5)
            if messages:
                deadline = time.monotonic() + timeout_s
            elif time.monotonic() > deadline:
                raise DiffSourceError(
                    f"reading {topic!r} at {bootstrap} made no progress for {timeout_s} s "
                    f"(partitions {sorted(pending)} not at their end)"
                )
            for msg in messages:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                        continue
                    raise DiffSourceError(f"reading {topic!r} at {bootstrap}: {err}")
                key = msg.key()
                partition = msg.partition()
                if key is None or partition is None:
                    continue
                value = msg.value()
                slot = (partition, key)
                if value is None:
                    latest.pop(slot, None)
                else:
                    latest[slot] = (value, msg.timestamp()[1])
        return state_of_records(f"{topic} at {bootstrap}", latest, len(partitions))
    finally:
        consumer.close()


# --------------------------------------------------------------------------------------------
# Comparing


@dataclass(frozen=True, slots=True)
class Difference:
    kind: str  # "only_in_a", "only_in_b", "value_differs"
    partition: int | None
    key: bytes

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "partition": self.partition,
            "key": text_or_none(self.key),
            "key_base64": b64(self.key),
        }


@dataclass(frozen=True, slots=True)
class DiffResult:
    a: str
    b: str
    keys_a: int
    keys_b: int
    only_in_a: int
    only_in_b: int
    value_differs: int
    examples: tuple[Difference, ...]
    by_key: bool
    notes: tuple[str, ...] = ()

    @property
    def equal(self) -> bool:
        return self.only_in_a == self.only_in_b == self.value_differs == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "equal": self.equal,
            "compared": "key" if self.by_key else "partition and key",
            "keys_a": self.keys_a,
            "keys_b": self.keys_b,
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "value_differs": self.value_differs,
            "examples": [d.to_json() for d in self.examples],
            "notes": list(self.notes),
        }


def _identity(state: State, by_key: bool) -> tuple[npt.NDArray[np.void], I64, list[str]]:
    """Sortable identities (partition or not, key digest), one row per identity (newest wins)."""
    part = np.zeros(len(state), dtype=np.int64) if by_key else state.partition
    rows = np.empty((len(state), 3), dtype=np.uint64)
    rows[:, 0] = part.astype(np.uint64)
    rows[:, 1] = state.hi
    rows[:, 2] = state.lo
    ident = rows.view(np.dtype((np.void, 24))).ravel()
    notes: list[str] = []
    order = np.lexsort((state.timestamp, ident))  # by identity, newest last
    sorted_ident = ident[order]
    last = np.ones(len(order), dtype=np.bool_)
    if len(order) > 1:
        last[:-1] = sorted_ident[:-1] != sorted_ident[1:]
    dup = len(order) - int(last.sum())
    if dup:
        notes.append(
            f"{state.name}: {dup} keys are live in more than one partition; the newest record counts"
        )
    keep = order[last]
    return ident[keep], keep, notes


def compare(a: State, b: State, *, by_key: bool = False, examples: int = 20) -> DiffResult:
    """The differences between two states (counts, and up to ``examples`` keys of each kind)."""
    notes: list[str] = []
    if not by_key and a.partitions != b.partitions:
        notes.append(
            f"the sources have {a.partitions} and {b.partitions} partitions: pass --by-key to compare keys "
            "wherever they live"
        )
    ia, rows_a, na = _identity(a, by_key)
    ib, rows_b, nb = _identity(b, by_key)
    notes += na + nb
    in_b = np.isin(ia, ib)
    in_a = np.isin(ib, ia)
    # match common identities: both sorted unique, so positions line up after filtering
    common_a = rows_a[in_b]
    common_b = rows_b[in_a]
    order_a = np.argsort(ia[in_b], kind="stable")
    order_b = np.argsort(ib[in_a], kind="stable")
    ca, cb = common_a[order_a], common_b[order_b]
    differs = (a.vhi[ca] != b.vhi[cb]) | (a.vlo[ca] != b.vlo[cb])
    shown: list[Difference] = []

    def add(kind: str, state: State, rows: I64) -> None:
        for i in rows[: max(0, examples - len(shown))].tolist():
            shown.append(Difference(kind, None if by_key else int(state.partition[i]), state.key(i)))

    add("value_differs", a, ca[differs])
    add("only_in_a", a, rows_a[~in_b])
    add("only_in_b", b, rows_b[~in_a])
    return DiffResult(
        a.name,
        b.name,
        len(ia),
        len(ib),
        int((~in_b).sum()),
        int((~in_a).sum()),
        int(differs.sum()),
        tuple(shown),
        by_key,
        tuple(notes),
    )
