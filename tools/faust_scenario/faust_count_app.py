"""The faust app of ``drive.py`` (issue 30): a count per key in a Table whose changelog is
compacted fast, one output record per input naming the input's partition and offset, with
``processing_guarantee="exactly_once"``. Configured by environment (see ``drive.py``)."""

import os
import sys

import faust

BOOTSTRAP = os.environ["BOOTSTRAP"]
APP_ID = os.environ.get("APP_ID", "fcount")
INPUT = os.environ.get("INPUT", "f-input")
OUTPUT = os.environ.get("OUTPUT", "f-output")

app = faust.App(
    APP_ID,
    broker=f"kafka://{BOOTSTRAP}",
    processing_guarantee="exactly_once",
    store="memory://",
    datadir=os.environ.get("DATADIR", "faust-data"),
    web_enabled=False,
    web_port=int(os.environ.get("WEB_PORT", "6066")),
    web_bind="127.0.0.1",
    topic_partitions=2,
    topic_replication_factor=1,
)
inp = app.topic(INPUT, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
out = app.topic(OUTPUT, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
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


@app.agent(inp)
async def process(stream):
    async for event in stream.events():
        key = event.key
        msg = event.message
        if event.value is None or event.value == b"":
            counts[key] = 0
            n = 0
        else:
            counts[key] += 1
            n = counts[key]
        await out.send(key=key, value=f"{msg.partition}:{msg.offset}:{n}".encode())


if __name__ == "__main__":
    sys.argv = [sys.argv[0], "worker", "-l", "warn"]
    app.main()
