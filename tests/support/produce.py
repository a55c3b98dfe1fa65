"""Producing keyed records to a test broker with confluent-kafka, and waiting for every ack."""

from __future__ import annotations

from confluent_kafka import Producer

from kompakt.testing import InProcessBroker


def produce(bootstrap: str, topic: str, items: list[tuple[bytes, bytes | None]], partition: int = 0) -> None:
    """Produce keyed records (None values are tombstones) and wait for every acknowledgement."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for key, value in items:
        producer.produce(topic, key=key, value=value, partition=partition)
    assert producer.flush(10) == 0


def produce_rounds(b: InProcessBroker, topic: str, rounds: int, keys: int, partition: int = 0) -> None:
    """``rounds`` rounds of the same ``keys`` keys, each round rolled into its own segment."""
    for r in range(rounds):
        produce(
            b.bootstrap_servers,
            topic,
            [(f"key-{k}".encode(), f"value-{r}".encode()) for k in range(keys)],
            partition,
        )
        b.roll(topic, partition)
