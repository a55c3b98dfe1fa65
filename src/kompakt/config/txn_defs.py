"""The transaction coordinator's and the producer-state configs (Kafka's ``TransactionLogConfig``
and ``TransactionStateManagerConfig``).

The typed view the coordinator runs with is :class:`kompakt.broker.txn.state_manager.TxnConfig`,
built from these by its ``from_broker``; the defaults live here only.
"""

from __future__ import annotations

from kompakt.config.defs import BOOL, INT, ConfigDef, Range, define

TXN_BROKER_DEFS: tuple[ConfigDef, ...] = (
    define("producer.id.expiration.ms", INT, 86_400_000, "Idle time in ms after which a producer id "
           "expires.", Range(1)),
    define("producer.id.expiration.check.interval.ms", INT, 600_000,
           "Period in ms of the producer id expiration check.", Range(1), dynamic=False),
    define("transaction.max.timeout.ms", INT, 900_000, "Largest transaction timeout a producer may ask.",
           Range(1), dynamic=False),
    define("transactional.id.expiration.ms", INT, 604_800_000,
           "Idle time in ms after which a transactional id expires.", Range(1), dynamic=False),
    define("transaction.state.log.num.partitions", INT, 50, "Partitions of __transaction_state.",
           Range(1), dynamic=False),
    define("transaction.state.log.segment.bytes", INT, 104_857_600,
           "segment.bytes of __transaction_state.", Range(1), dynamic=False),
    define("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10_000,
           "Period in ms of the check that aborts transactions open past their timeout.", Range(1),
           dynamic=False),
    define("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3_600_000,
           "Period in ms of the check that expires idle transactional ids.", Range(1), dynamic=False),
    define("transaction.partition.verification.enable", BOOL, True,
           "Verify with the coordinator that a transactional write's partition is in its transaction "
           "(KIP-890).", dynamic=False),
    define("transaction.version", INT, 2,
           "The finalized level of Kafka's transaction.version feature this broker serves: 2 bumps the "
           "producer epoch on every commit and abort (KIP-890 part 2), 1 serves the earlier protocol "
           "(as kafka-features downgrade --feature transaction.version=1), 0 also writes "
           "__transaction_state values in their classic version 0.", Range(0, 2), dynamic=False),
)  # fmt: skip
