"""A Quix Streams exactly-once app for the end-to-end test: count records per key.

Run as ``python quix_count_app.py BOOTSTRAP INPUT OUTPUT GROUP STATE_DIR``. The count lives in
Quix's state store, backed by a compacted changelog topic that Quix creates on kompakt; every
output record is ``{"key": ..., "count": n}``. The process runs until it is stopped (the test
kills it with SIGKILL mid-stream, or ends it with SIGTERM). SIGUSR1 writes every thread's stack
to stderr, so a test that times out can show where the app waits.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
from typing import Any

from quixstreams import Application, State


def count(value: dict[str, Any], state: State) -> dict[str, Any]:
    seen = int(state.get("count", 0)) + 1
    state.set("count", seen)
    return {"key": value["key"], "seq": value["seq"], "count": seen}


#: librdkafka (confluent-kafka 2.16.1) re-bootstraps once every broker it knew has been down
#: (KIP-899's default ``metadata.recovery.strategy=rebootstrap``); after that it forgets the
#: transaction coordinator, and ``send_offsets_to_transaction`` can hang for good after
#: AddOffsetsToTxn answers NO_ERROR, never sending TxnOffsetCommit (librdkafka issues #5511 and
#: #5456). With one broker that is killed and restarted at the same address, re-bootstrapping
#: gains nothing, so the app keeps its connections and retries them every second instead.
RECONNECT = {"metadata.recovery.strategy": "none", "reconnect.backoff.max.ms": 1000}


def _debug() -> dict[str, str]:
    """librdkafka's debug contexts from ``QUIX_APP_RDKAFKA_DEBUG`` (e.g. ``eos,protocol``)."""
    contexts = os.environ.get("QUIX_APP_RDKAFKA_DEBUG")
    return {"debug": contexts} if contexts else {}


def main() -> None:
    faulthandler.register(signal.SIGUSR1, all_threads=True)
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
        producer_extra_config={
            "transactional.id": f"{group}-txn",
            "transaction.timeout.ms": 10_000,
            **RECONNECT,
            **_debug(),
        },
        consumer_extra_config={
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
            **RECONNECT,
            **_debug(),
        },
    )
    input_topic = app.topic(source, value_deserializer="json")
    output_topic = app.topic(sink, value_serializer="json")
    sdf = app.dataframe(input_topic)
    sdf = sdf.apply(count, stateful=True)
    sdf.to_topic(output_topic)
    app.run()


if __name__ == "__main__":
    main()
