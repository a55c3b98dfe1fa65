"""Request decoding: what the bounds check (``kompakt.protocol.bounds``) adds to every request.

For typical frames (Produce v9 as librdkafka sends it, Fetch v12 from a consumer of a few or of
many partitions, Metadata v12) it times, per request:

* ``kio_us``: kio's native readers alone (header and body), what ``decode_request`` did before the
  check existed;
* ``check_us``: the bounds check alone;
* ``decode_us``: ``codec.decode_request`` as the broker calls it (check, then kio);
* ``overhead_pct``: ``check_us / kio_us``.

Each figure is the best of ``KOMPAKT_BENCH_PROTOCOL_REPEATS`` (default 7) runs of
``KOMPAKT_BENCH_PROTOCOL_LOOPS`` (default 20,000) decodes, the usual microbenchmark guard against a
noisy machine. Prints one JSON object on its last line.

Measured when the check was written (shared 2-core VM, several runs): the check takes 1.2-1.4 us
for a one-partition Produce v9 (kio 1.4-1.9 us), 1.0-1.5 us for a four-partition Fetch v12 (kio
1.7-2.8), 9-11 us for a 100-partition Fetch (kio 20-22) and 13-16 us for a 100-topic Metadata
v12 (kio 12-14); 5-6 us for a Produce of 8 MiB of records, where kio's copy of them takes 290-380.
``decode_request`` as a whole went from 4.1-4.9 to 4.9-6.2 us for the one-partition Produce.
"""

from __future__ import annotations

import json
import os
import sys
import timeit
from collections.abc import Callable, Mapping

from kompakt.broker.dispatch import HANDLERS
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey

SUPPORTED = {key: spec.versions for key, spec in HANDLERS.items()}
REPEATS = int(os.environ.get("KOMPAKT_BENCH_PROTOCOL_REPEATS", "7"))
LOOPS = int(os.environ.get("KOMPAKT_BENCH_PROTOCOL_LOOPS", "20000"))


def frame(api_key: int, version: int, values: Mapping[str, object]) -> bytes:
    body = codec.build(codec.request_class(api_key, version), values)
    return codec.encode_request(body, 7, "rdkafka")[4:]


def produce(partitions: int, record_bytes: int) -> bytes:
    records = b"\x00" * record_bytes
    return frame(
        ApiKey.PRODUCE,
        9,
        {
            "transactional_id": None,
            "acks": 1,
            "timeout": 30_000,
            "topic_data": [
                {
                    "name": "events",
                    "partition_data": [{"index": p, "records": records} for p in range(partitions)],
                }
            ],
        },
    )


def fetch(topics: int, partitions: int) -> bytes:
    partition = {
        "current_leader_epoch": -1,
        "fetch_offset": 123_456,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": 1_048_576,
    }
    return frame(
        ApiKey.FETCH,
        12,
        {
            "replica_id": -1,
            "max_wait": 500,
            "min_bytes": 1,
            "max_bytes": 52_428_800,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": f"topic-{t}",
                    "partitions": [{"partition": p, **partition} for p in range(partitions)],
                }
                for t in range(topics)
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )


def metadata(topics: int) -> bytes:
    return frame(
        ApiKey.METADATA,
        12,
        {
            "topics": [{"topic_id": None, "name": f"topic-{t}"} for t in range(topics)],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )


def best_us(call: Callable[[], object]) -> float:
    return min(timeit.repeat(call, number=LOOPS, repeat=REPEATS)) / LOOPS * 1e6


def measure(data: bytes) -> dict[str, float]:
    api_key, version, _ = codec.peek(data)
    body_class = codec.request_class(api_key, version)
    checker = codec.request_checker(api_key, version)
    read_header = codec.entity_reader(body_class.__header_schema__)
    read_body = codec.entity_reader(body_class)

    def kio_only() -> None:
        _, header_size = read_header(data, 0)
        read_body(data, header_size)

    codec.decode_request(data, SUPPORTED)  # compile the layouts and kio's schema first
    kio_us = best_us(kio_only)
    check_us = best_us(lambda: checker.check(data))
    decode_us = best_us(lambda: codec.decode_request(data, SUPPORTED))
    return {
        "frame_bytes": len(data),
        "kio_us": round(kio_us, 2),
        "check_us": round(check_us, 2),
        "decode_us": round(decode_us, 2),
        "overhead_pct": round(100 * check_us / kio_us, 1),
    }


def main() -> int:
    cases = {
        "produce_v9_1_partition_16KiB": produce(1, 16 * 1024),
        "produce_v9_8_partitions_1MiB": produce(8, 1024 * 1024),
        "fetch_v12_1_topic_4_partitions": fetch(1, 4),
        "fetch_v12_10_topics_100_partitions": fetch(10, 10),
        "metadata_v12_1_topic": metadata(1),
        "metadata_v12_100_topics": metadata(100),
    }
    results = {name: measure(data) for name, data in cases.items()}
    for name, figures in results.items():
        print(f"{name:38} {figures}", file=sys.stderr)
    print(json.dumps({"loops": LOOPS, "repeats": REPEATS, "cases": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
