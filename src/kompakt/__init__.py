"""kompakt: a Kafka-compatible event log whose heart is Apache Kafka's log compaction."""

__version__ = "0.1.0"
