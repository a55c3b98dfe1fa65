"""Worked example (c): a changelog written by Quix Streams survives every legal compaction.

The exactly-once count app (``quix_count_app.py``) counts records per key into its state store,
which Quix backs with a compacted changelog topic on kompakt. That changelog, read from the
cluster (``kafka://…``, a ``read_committed`` consumer), is the source of a compaction check whose
replay is Quix's own restore: every changelog record goes through
``MemoryStorePartition.recover_from_changelog_message``, as Quix recovers a partition whose local
state is lost, and the state is what the store then holds. It must be the same on every variant,
and hold the counts the app wrote.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from kompakt.testing.compaction_log import LogRecord
from kompakt.testing.replay_check import assert_compaction_safe, cluster_source

from .conftest import External, Kompakt, poll_until
from .txn_clients import create_topic, read_all, unique

APP = Path(__file__).with_name("quix_count_app.py")
KEYS = 5
RECORDS = 60


def quix_restore(records: list[LogRecord]) -> dict[tuple[str, bytes], bytes]:
    """Quix Streams' own recovery of a store partition from its changelog records."""
    from quixstreams.state.memory.partition import MemoryStorePartition
    from quixstreams.state.metadata import CHANGELOG_CF_MESSAGE_HEADER, CHANGELOG_TTL_STAMPED_HEADER

    partition = MemoryStorePartition(changelog_producer=None)
    seen: set[tuple[str, bytes]] = set()
    for r in records:
        headers = dict(r.headers)
        column_family = (headers.get(CHANGELOG_CF_MESSAGE_HEADER) or b"").decode()
        assert r.key is not None and column_family
        partition.recover_from_changelog_message(
            r.key,
            r.value,
            column_family,
            r.offset,
            ttl_stamped=bool(headers.get(CHANGELOG_TTL_STAMPED_HEADER)),
        )
        seen.add((column_family, r.key))
    state: dict[tuple[str, bytes], bytes] = {}
    for column_family, key in sorted(seen):
        if partition.exists(key, column_family):
            value = partition.get(key, column_family)
            assert isinstance(value, bytes)
            state[(column_family, key)] = value
    partition.close()
    return state


def test_quix_changelog_restore_survives_compaction(kompakt: Kompakt | External, tmp_path: Path) -> None:
    bs = kompakt.bootstrap
    source, sink, group = unique("quixcl-in"), unique("quixcl-out"), unique("quixcl")
    create_topic(bs, source)
    create_topic(bs, sink)
    producer = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
    for seq in range(RECORDS):
        key = f"k{seq % KEYS}"
        producer.produce(source, key=key.encode(), value=json.dumps({"key": key, "seq": seq}).encode())
    assert producer.flush(30) == 0

    log = tmp_path / "app.log"
    with log.open("ab") as out:
        app = subprocess.Popen(
            [sys.executable, str(APP), bs, source, sink, group, str(tmp_path / "state")],
            stdout=out,
            stderr=out,
        )
    try:

        def outputs() -> int:
            return len(read_all(bs, sink, "read_committed")[0])

        poll_until(lambda: outputs() >= RECORDS, deadline_s=90, what="all outputs")
    finally:
        app.send_signal(signal.SIGTERM)
        app.wait(30)

    changelogs = [
        t for t in AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10).topics if group in t
    ]
    assert len(changelogs) == 1, changelogs
    changelog = cluster_source(f"kafka://{bs}/{changelogs[0]}", 0)
    assert len(changelog.batches) > KEYS  # the latest count per key at each of the app's commits

    state = quix_restore([r for r, _control in changelog.records()])
    counts = {key.decode(): json.loads(value) for (_cf, key), value in state.items()}
    assert sorted(counts.values()) == [RECORDS // KEYS] * KEYS, (counts, log.read_text()[-2000:])

    report = assert_compaction_safe(changelog, quix_restore)
    assert report.checked >= 10
