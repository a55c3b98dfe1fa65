"""``kompakt produce`` into a topic with a small ``segment.bytes``, and ``--producer-property`` (issue 17).

The broker refuses a batch larger than the topic's ``segment.bytes`` (RECORD_LIST_TOO_LARGE, as
Kafka does); librdkafka batches up to 1 MB by default, so before this a produce of a few hundred
lines into such a topic failed. Batches are now capped at the topic's limit, and the producer's
own settings are reachable by Kafka's names.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kompakt.testing.broker import InProcessBroker
from tests.support.cli import run, run_cli

LINES = "".join(f"user_{i}:{'x' * 40}\n" for i in range(500))
KEYED = ("--property", "parse.key=true", "--property", "key.separator=:")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    with InProcessBroker(tmp_path_factory.mktemp("produce") / "data") as running:
        yield running


def _dump(path: Path) -> list[dict[str, Any]]:
    import subprocess

    completed = subprocess.run(
        [sys.executable, "-m", "kompakt.cli.main", "log", "dump", str(path), "--output", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    found: list[dict[str, Any]] = []
    for entry in json.loads(completed.stdout):
        found.extend(entry["batches"])
    return found


def test_many_lines_into_a_small_segment_topic(broker: InProcessBroker) -> None:
    bootstrap = broker.bootstrap_servers
    assert run(bootstrap, "topic", "create", "small", "--config", "internal.segment.bytes=1024").code == 0
    produced = run(bootstrap, "produce", "small", *KEYED, "--output", "json", stdin=LINES)
    assert produced.code == 0, produced.stderr
    assert json.loads(produced.stdout)["sent"] == 500
    stored = broker.records("small")
    assert [r.key for r in stored] == [f"user_{i}".encode() for i in range(500)]
    assert all(batch["size"] <= 1024 for batch in _dump(broker.data_dir / "small-0"))


def test_a_larger_batch_size_is_capped_with_a_note(broker: InProcessBroker) -> None:
    bootstrap = broker.bootstrap_servers
    assert run(bootstrap, "topic", "create", "small-2", "--config", "internal.segment.bytes=2048").code == 0
    produced = run(
        bootstrap, "produce", "small-2", *KEYED,
        "--producer-property", "batch.size=65536", "--producer-property", "linger.ms=20",
        stdin=LINES,
    )  # fmt: skip
    assert produced.code == 0, produced.stderr
    assert (
        "note: batch.size 65536 is more than the topic's internal.segment.bytes=2048: using 2048"
        in produced.stderr
    )
    assert len(broker.records("small-2")) == 500


def test_producer_properties_reach_the_producer(broker: InProcessBroker) -> None:
    bootstrap = broker.bootstrap_servers
    assert run(bootstrap, "topic", "create", "props").code == 0
    produced = run(
        bootstrap, "produce", "props", *KEYED,
        "--producer-property", "compression.type=lz4",
        "--producer-property", "batch.size=4096",
        "--producer-property", "linger.ms=100",
        "--producer-property", "acks=1",
        stdin=LINES,
    )  # fmt: skip
    assert produced.code == 0, produced.stderr
    found = _dump(broker.data_dir / "props-0")
    assert {b["codec"] for b in found} == {"lz4"}
    assert len(found) > 1  # 500 records of ~50 bytes do not fit one 4 KiB batch
    assert sum(b["count"] for b in found) == 500


def test_an_unknown_producer_property_is_a_usage_error(broker: InProcessBroker) -> None:
    bootstrap = broker.bootstrap_servers
    assert run(bootstrap, "topic", "create", "props-2").code == 0
    bad = run(bootstrap, "produce", "props-2", "--producer-property", "no.such.thing=1", stdin="a\n")
    assert bad.code == 2
    assert 'No such configuration property: "no.such.thing"' in bad.stderr


def test_batches_are_capped_at_max_message_bytes_and_the_note_is_one_line(broker: InProcessBroker) -> None:
    """The broker refuses a batch over the topic's ``max.message.bytes`` (MESSAGE_TOO_LARGE); the
    note saying so stays one line in a pipe (80 columns), where it can be grepped."""
    bootstrap = broker.bootstrap_servers
    assert run(bootstrap, "topic", "create", "small-3", "--config", "max.message.bytes=2000").code == 0
    produced = run(
        bootstrap, "produce", "small-3", *KEYED, "--producer-property", "batch.size=100000", stdin=LINES
    )
    assert produced.code == 0, produced.stderr
    assert (
        "note: batch.size 100000 is more than the topic's max.message.bytes=2000: using 2000\n"
        in produced.stderr
    )
    assert len(broker.records("small-3")) == 500
    assert all(batch["size"] <= 2000 for batch in _dump(broker.data_dir / "small-3-0"))


def test_a_topic_that_does_not_exist_is_created_as_kafka_s_console_producer_has_it(
    broker: InProcessBroker,
) -> None:
    bootstrap = broker.bootstrap_servers
    produced = run(bootstrap, "produce", "made-on-first-use", *KEYED, stdin="a:1\nb:2\n")
    assert produced.code == 0, produced.stderr
    assert "topic 'made-on-first-use' did not exist; the broker created it with 1 partition(s)" in (
        produced.stderr
    )
    assert [(r.key, r.value) for r in broker.records("made-on-first-use")] == [(b"a", b"1"), (b"b", b"2")]
    typed = run_cli(
        "kafka-console-producer", "--bootstrap-server", bootstrap, "--topic", "typed-on-first-use",
        "--property", "parse.key=true", "--property", "key.separator=:", stdin="k:v\n",
    )  # fmt: skip
    assert typed.code == 0, typed.stderr
    assert [r.value for r in broker.records("typed-on-first-use")] == [b"v"]
    again = run(bootstrap, "produce", "made-on-first-use", *KEYED, stdin="c:3\n")
    assert again.code == 0 and "did not exist" not in again.stderr


def test_a_broker_that_does_not_auto_create_says_how_to_create_the_topic(tmp_path: Path) -> None:
    with InProcessBroker(tmp_path / "data", overrides={"auto.create.topics.enable": "false"}) as strict:
        refused = run(strict.bootstrap_servers, "produce", "nowhere", stdin="x\n")
        assert refused.code == 1
        assert "topic 'nowhere' does not exist and the broker does not create topics on first use" in (
            refused.stderr
        )
        assert "kompakt topic create" in refused.stderr
        assert not (strict.data_dir / "nowhere-0").exists()
