"""A Quix Streams exactly-once app for the end-to-end test: count records per key.

Run as ``python quix_count_app.py BOOTSTRAP INPUT OUTPUT GROUP STATE_DIR``. The count lives in
Quix's state store, backed by a compacted changelog topic that Quix creates on kompakt; every
output record is ``{"key": ..., "count": n}``. The process runs until it is stopped (the test
kills it with SIGKILL mid-stream, or ends it with SIGTERM).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from quixstreams import Application, State


def count(value: dict[str, Any], state: State) -> dict[str, Any]:
    seen = int(state.get("count", 0)) + 1
    state.set("count", seen)
    return {"key": value["key"], "seq": value["seq"], "count": seen}


def main() -> None:
    bootstrap, source, sink, group, state_dir = sys.argv[1:6]
    app = Application(
        broker_address=bootstrap,
        consumer_group=group,
        auto_offset_reset="earliest",
        processing_guarantee="exactly-once",
        commit_every=7,
        commit_interval=0.5,
        state_dir=state_dir,
        loglevel=os.environ.get("QUIX_APP_LOGLEVEL", "WARNING"),
        # A fixed transactional id: the restarted app fences the killed one's open transaction.
        producer_extra_config={"transactional.id": f"{group}-txn", "transaction.timeout.ms": 10_000},
        consumer_extra_config={"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
    )
    input_topic = app.topic(source, value_deserializer="json")
    output_topic = app.topic(sink, value_serializer="json")
    sdf = app.dataframe(input_topic)
    sdf = sdf.apply(count, stateful=True)
    sdf.to_topic(output_topic)
    app.run()


if __name__ == "__main__":
    main()
