"""Builders for the offline log tools' tests: kompakt and Kafka-format directories, and a runner.

Directories are written through kompakt's own LogManager (with a FakeClock, so every timestamp is
known) or, for the "independent writer" case, byte for byte with kafka-python's record builder.
Commands run in-process through ``kompakt.cli.main.main`` so exit codes and the one-line error
convention are exercised exactly as the console script does it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.log.partition_log import PartitionLog
from kompakt.records.builder import SimpleRecord, build_batch

T0 = 1_700_000_000_000
HOUR = 3_600_000
DAY = 24 * HOUR


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run ``kompakt ARGS`` in-process; returns exit code, stdout and stderr."""
    from kompakt.cli import main as cli_main
    from kompakt.cli.output import console, err_console

    monkeypatch.setattr(console, "width", 250, raising=False)
    monkeypatch.setattr(err_console, "width", 1000, raising=False)

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["kompakt", *args])
        monkeypatch.setattr(console, "_file", None, raising=False)
        monkeypatch.setattr(err_console, "_file", None, raising=False)
        code = 0
        try:
            cli_main.main()
        except SystemExit as exc:
            code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


class DirBuilder:
    """A kompakt data directory written through LogManager with a FakeClock."""

    def __init__(self, path: Path, *, start_ms: int = T0, broker: dict[str, str] | None = None) -> None:
        self.path = path
        self.clock = FakeClock(start_ms)
        self.manager = LogManager(path, BrokerConfig.from_properties(broker or {}), self.clock)
        self.manager.open()

    def topic(self, name: str, **configs: str) -> PartitionLog:
        self.manager.create_topic(name, 1, {k.replace("_", "."): v for k, v in configs.items()})
        return self.manager.logs()[(name, 0)]

    def put(
        self,
        log: PartitionLog,
        pairs: Sequence[tuple[bytes | None, bytes | None]],
        *,
        ts: int | None = None,
        **kwargs: Any,
    ) -> None:
        stamp = self.clock.now_ms() if ts is None else ts
        records = [SimpleRecord(k, v, timestamp=stamp) for k, v in pairs]
        log.append(build_batch(records, **kwargs))

    def close(self) -> Path:
        self.manager.close()
        return self.path


@pytest.fixture
def build(tmp_path: Path) -> Iterator[Any]:
    made: list[DirBuilder] = []

    def make(name: str = "data", **kwargs: Any) -> DirBuilder:
        builder = DirBuilder(tmp_path / name, **kwargs)
        made.append(builder)
        return builder

    yield make
    for builder in made:
        builder.manager.close()


def keys(n: int, prefix: str = "k", value: bytes | None = b"v") -> list[tuple[bytes | None, bytes | None]]:
    return [(f"{prefix}{i}".encode(), value) for i in range(n)]


def kafka_batch(base_offset: int, records: list[tuple[bytes | None, bytes | None]], ts: int = 1_000) -> bytes:
    """One v2 batch written by kafka-python, an independent implementation of Kafka's format."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=[("h", b"x")] if i == 0 else [])
    raw = bytearray(builder.build())
    raw[0:8] = base_offset.to_bytes(8, "big")  # the base offset lies outside the CRC
    return bytes(raw)


def kafka_dir(root: Path, topic: str = "kt") -> Path:
    """A Kafka-style data directory: two segments and no indexes, written without kompakt."""
    part = root / f"{topic}-0"
    part.mkdir(parents=True)
    seg0 = kafka_batch(0, [(b"a", b"1"), (b"b", b""), (b"c", None)]) + kafka_batch(3, [(b"a", b"2")])
    (part / "00000000000000000000.log").write_bytes(seg0)
    (part / "00000000000000000004.log").write_bytes(
        kafka_batch(4, [(None, b"nokey"), (b"d", b"4")], ts=2_000)
    )
    (root / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=abc\n")
    return root
