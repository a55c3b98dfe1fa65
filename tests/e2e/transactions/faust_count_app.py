"""A faust-streaming exactly-once app for the end-to-end test (issue 30): a count per key.

Configured by environment: ``BOOTSTRAP``, ``APP_ID``, ``INPUT``, ``OUTPUT``, ``DATADIR`` and
``DUMP``. The count lives in a faust Table (in memory) backed by the compacted changelog
``APP_ID-counts-changelog``; every input gives one output record ``partition:offset:count``
naming the input, so the test can tell which inputs were processed and how often. When the
Table's restore from the changelog is complete (before any input is processed) the app writes the
restored table as JSON to ``DUMP``: what faust rebuilt from the changelog kompakt compacted.
The process runs until it is stopped (SIGKILL mid-stream, or SIGTERM).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import faust

APP_ID = os.environ["APP_ID"]
DUMP = Path(os.environ["DUMP"])

app = faust.App(
    APP_ID,
    broker=f"kafka://{os.environ['BOOTSTRAP']}",
    processing_guarantee="exactly_once",
    store="memory://",
    datadir=os.environ["DATADIR"],
    web_enabled=False,
    web_port=int(os.environ["WEB_PORT"]),  # bound even when disabled
    topic_partitions=2,
    topic_replication_factor=1,
    # A killed worker leaves its member in the group until its session expires; the restarted
    # one waits for that in its first rebalance (faust's default is 60 s).
    broker_session_timeout=6.0,
    broker_heartbeat_interval=1.0,
    broker_commit_interval=0.5,
)
source = app.topic(
    os.environ["INPUT"], key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
)
sink = app.topic(
    os.environ["OUTPUT"], key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
)
counts = app.Table(
    "counts",
    default=int,
    # The keys are the input's raw bytes: without key_type faust writes them to the changelog
    # as they are but reads them back as JSON, and every restored record fails to decode.
    key_type=bytes,
    value_type=int,
    partitions=2,
    extra_topic_configs={"segment.ms": "1000", "min.cleanable.dirty.ratio": "0.01"},
)


@app.on_rebalance_complete.connect
async def dump_restored(sender: Any, **kwargs: Any) -> None:
    """Sent by faust's recovery once the active tables are restored, before the input partitions
    resume: the table here is exactly what the changelog gave back. A rebalance that gave this
    worker no input partitions (faust's first one can) restored nothing and is skipped."""
    assigned = {tp.topic for tp in app.consumer.assignment()}
    if DUMP.exists() or source.get_topic_name() not in assigned:
        return
    restored = {key.decode(): value for key, value in counts.data.items()}
    tmp = DUMP.with_suffix(".tmp")
    tmp.write_text(json.dumps(restored, sort_keys=True))
    tmp.replace(DUMP)


@app.agent(source)
async def process(stream: Any) -> None:
    async for event in stream.events():
        key, message = event.key, event.message
        if not event.value:  # a tombstone input resets the key's count
            counts[key] = 0
        else:
            counts[key] += 1
        await sink.send(key=key, value=f"{message.partition}:{message.offset}:{counts[key]}".encode())


if __name__ == "__main__":
    sys.argv = [sys.argv[0], "worker", "-l", "warn"]
    app.main()
