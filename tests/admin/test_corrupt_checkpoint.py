"""A corrupt ``cleaner-offset-checkpoint`` must not stop compaction or the admin endpoints.

Kafka's ``LogCleanerManager.allCleanerCheckpoints`` logs an unreadable checkpoint and carries on
with no entries, so every log is cleaned from its start and the next checkpoint write replaces
the file. kompakt does the same, and keeps the bad bytes beside the file as
``cleaner-offset-checkpoint.corrupt-<ms>`` instead of overwriting them silently.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from kompakt.log.checkpoint import OffsetCheckpointFile
from kompakt.testing import InProcessBroker

from .conftest import produce
from .test_metrics import scrape, value

DEADLINE_S = 20.0
TOPIC = "users"

CORRUPT_CHECKPOINTS = {
    "garbage": b"\x00\xffnot a checkpoint\x00\n\x13\x37",
    "wrong-version": f"1\n1\n{TOPIC} 0 2\n".encode(),
    "wrong-count": f"0\n3\n{TOPIC} 0 2\n".encode(),
    "truncated-line": f"0\n2\n{TOPIC} 0 2\n{TOPIC} 1".encode(),
    "non-numeric-offset": f"0\n1\n{TOPIC} 0 two\n".encode(),
}


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        return json.loads(response.read())


def wait_for(what: str, check: Any) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.mark.parametrize("content", CORRUPT_CHECKPOINTS.values(), ids=CORRUPT_CHECKPOINTS.keys())
def test_cleaner_thread_and_endpoints_survive_a_corrupt_checkpoint(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    checkpoint = data / "cleaner-offset-checkpoint"
    checkpoint.write_bytes(content)
    caplog.set_level(logging.WARNING, logger="kompakt.cleaner")
    with InProcessBroker(data) as broker:
        broker.create_topic(TOPIC, 1, cleanup_policy="compact")
        produce(broker.bootstrap_servers, TOPIC, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"a", b"3")])
        broker.roll(TOPIC, 0)

        # The cleaner thread (not an explicit compact-now) dedupes the log from its start.
        def cleaned() -> bool:
            return [(r.offset, r.key, r.value) for r in broker.records(TOPIC, 0)] == [
                (1, b"b", b"1"),
                (3, b"a", b"3"),
            ]

        wait_for("the cleaner thread to clean the log", cleaned)
        parts = get_json(f"{broker.admin_url}/v1/partitions?topic={TOPIC}")["partitions"]
        assert parts[0]["dirty_ratio"] == 0.0 and parts[0]["uncleanable"] is False
        families = scrape(broker.admin_url)
        assert value(families, "kafka_log_logcleaner_deadthreadcount") == 0
        assert value(families, "kafka_log_logcleanermanager_uncleanable_partitions_count") == 0
        cleaner = broker.admin.broker.cleaner
        assert cleaner is not None and cleaner.thread_count == 1 and cleaner.dead_thread_count == 0

    # The clean's checkpoint replaced the bad file; the bad bytes are kept beside it, once.
    assert OffsetCheckpointFile(checkpoint).read() == {(TOPIC, 0): 4}
    [quarantined] = data.glob("cleaner-offset-checkpoint.corrupt-*")
    assert quarantined.read_bytes() == content
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    problems = [m for m in messages if m.startswith("Cannot read the cleaner checkpoint")]
    assert len(problems) == 1, messages  # once, although every selection pass reads the file
    assert str(checkpoint) in problems[0] and "from the log start" in problems[0]
    assert f"Kept the unreadable cleaner checkpoint {checkpoint} as {quarantined.name}" in messages


def test_checkpoint_corrupted_while_running(tmp_path: Path) -> None:
    """A file that goes bad under a running broker: the endpoints answer, compaction goes on."""
    data = tmp_path / "data"
    with InProcessBroker(data) as broker:
        broker.create_topic(TOPIC, 1, cleanup_policy="compact")
        produce(broker.bootstrap_servers, TOPIC, [(b"a", b"1"), (b"a", b"2")])
        broker.roll(TOPIC, 0)
        checkpoint = data / "cleaner-offset-checkpoint"
        wait_for("the first clean", lambda: OffsetCheckpointFile(checkpoint).read() == {(TOPIC, 0): 2})
        checkpoint.write_bytes(b"0\n1\nusers 0\n")
        assert get_json(f"{broker.admin_url}/v1/partitions")["partitions"]
        assert value(scrape(broker.admin_url), "kafka_log_logcleaner_deadthreadcount") == 0
        produce(broker.bootstrap_servers, TOPIC, [(b"a", b"3"), (b"a", b"4")])
        broker.roll(TOPIC, 0)
        wait_for(
            "the second clean",
            lambda: [(r.offset, r.value) for r in broker.records(TOPIC, 0)] == [(3, b"4")],
        )
        assert value(scrape(broker.admin_url), "kafka_log_logcleaner_deadthreadcount") == 0
    assert OffsetCheckpointFile(checkpoint).read() == {(TOPIC, 0): 4}
    [quarantined] = data.glob("cleaner-offset-checkpoint.corrupt-*")
    assert quarantined.read_bytes() == b"0\n1\nusers 0\n"
