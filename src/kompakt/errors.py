"""The exception hierarchy shared by every layer.

Each type says what the caller should do about it, in Kafka's spirit: a corrupt index is rebuilt, a
corrupt record is truncated on recovery or rejected on produce, an aborted clean deletes its
``.cleaned`` output, an uncleanable partition is marked and skipped. The mapping to Kafka wire error
codes lives in exactly one place, :mod:`kompakt.broker.error_codes`; every subclass, wherever it is
defined, is in it (``tests/broker/test_error_codes.py`` fails on one that is not).
"""

from __future__ import annotations


class KompaktError(Exception):
    """Root of every error kompakt raises on purpose."""


class CorruptRecordError(KompaktError):
    """Bytes that do not form a valid record batch (bad CRC, bad size, bad magic, truncated)."""


class InvalidRecordError(KompaktError):
    """A well-formed batch that breaks a produce rule (null key on a compacted topic, bad offsets...).

    ``record_errors`` holds ``(batch_index, message)`` pairs, as Kafka's per-record errors do.
    """

    def __init__(self, message: str, record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class RecordTooLargeError(KompaktError):
    """A batch larger than ``max.message.bytes`` (Kafka's MESSAGE_TOO_LARGE)."""


class RecordListTooLargeError(KompaktError):
    """A record set larger than ``segment.bytes`` (Kafka's RECORD_LIST_TOO_LARGE)."""


class InvalidTimestampError(KompaktError):
    """A CreateTime timestamp outside the allowed window, or a client-set LogAppendTime batch."""


class CompressionError(KompaktError):
    """A payload that the named codec cannot decode, or an unknown codec id."""


class CorruptIndexError(KompaktError):
    """An ``.index``/``.timeindex`` that fails its sanity check; the reaction is a rebuild."""


class OffsetOutOfRangeError(KompaktError):
    """A read below the log start offset or past the log end offset."""


class InvalidOffsetError(KompaktError):
    """An offset that cannot be stored where it was asked to go (e.g. relative offset overflow)."""


class ConfigError(KompaktError):
    """A config name that is unknown, or a value of the wrong type or out of range.

    The message names the config, as Kafka's ConfigException does.
    """


class InvalidConfigurationError(ConfigError):
    """A set of configs that is invalid together (Kafka's InvalidConfigurationException)."""


class LogDirectoryError(KompaktError):
    """A path that is not a usable log directory, or a directory already locked by another process."""


class PartitionOfflineError(KompaktError):
    """A partition whose files are corrupt in a way recovery must not repair by itself.

    It names the file and offset; the partition stays offline and other partitions keep serving.
    """


class UnknownTopicOrPartitionError(KompaktError):
    """A topic or partition that does not exist."""


class TopicExistsError(KompaktError):
    """CreateTopics for a name that already exists."""


class CleaningAbortedError(KompaktError):
    """A clean was aborted (partition deleted, truncated, or cleaner shutting down).

    The ``.cleaned`` output is deleted and the checkpoint is not moved.
    """


class OffsetMapTooSmallError(KompaktError):
    """The dedupe buffer cannot hold even one key, so cleaning would never make progress."""


class UncleanablePartitionError(KompaktError):
    """Cleaning one partition failed; it is marked uncleanable and the cleaner moves on."""


class ProducerFencedError(KompaktError):
    """A produce from an older producer epoch (Kafka's INVALID_PRODUCER_EPOCH)."""


class OutOfOrderSequenceError(KompaktError):
    """A produce whose sequence does not follow the producer's last one."""


class DuplicateSequenceError(KompaktError):
    """A produce that duplicates one of the producer's last five batches.

    ``first_offset``/``last_offset`` are the offsets originally assigned, so the broker can answer
    the retry with them and append nothing.
    """

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class CorruptCheckpointError(KompaktError):
    """A checkpoint file (offset or leader-epoch checkpoint) that does not parse.

    The message names the file and the line; Kafka treats this as an IOException on the log dir.
    """


class InvalidTopicError(KompaktError):
    """A topic name Kafka would refuse (illegal characters, too long, ``.`` or ``..``)."""


class IllegalCleanerStateError(KompaktError):
    """A cleaning-state transition that the cleaner manager's state machine does not allow.

    For example resuming a partition that is not paused, or finishing a clean that was never
    started. It always means a caller bug (Kafka raises IllegalStateException), never bad data.
    """


class FileOperationError(KompaktError):
    """A file operation that failed where the OS would have raised an I/O error.

    kompakt's own code lets a real ``OSError`` through, and the broker answers it with
    KAFKA_STORAGE_ERROR, as Kafka answers an IOException in a log directory. The fault models of
    :mod:`kompakt.testing` raise a subclass in its place, so a crash test that goes through the
    broker sees the code a real fault would give.
    """


class OperatorError(KompaktError):
    """An error of the operator's tools: the command line, the admin client, backup and restore,
    the server's start-up. It ends a command or the process, never a request, so it has no Kafka
    error code of its own (the error map gives it Kafka's default, UNKNOWN_SERVER_ERROR)."""
