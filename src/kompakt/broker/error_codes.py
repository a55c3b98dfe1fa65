"""The one place where exceptions become Kafka error codes.

A handler that catches an exception answers with :func:`error_code_for`; the code is the one
Kafka answers for the matching condition (``org.apache.kafka.common.protocol.Errors``, and how
``ReplicaManager`` and ``KafkaApis`` choose it). Every :class:`~kompakt.errors.KompaktError`
subclass has an entry here, through its own class or a base (``tests/broker/test_error_codes.py``
walks them all), so a new error gets its code chosen when it is written, not UNKNOWN_SERVER_ERROR
by accident. Three groups:

* request errors, with the code of Kafka's exception for the same condition;
* storage errors: Kafka answers a log directory it cannot read or write with KAFKA_STORAGE_ERROR
  (``KafkaStorageException``: ``UnifiedLog`` and ``LogDirFailureChannel`` turn an IOException
  into it), so ``OSError`` and files kompakt finds corrupt beyond repair get that code, which
  tells a client to refresh its metadata and retry;
* internal errors that no request should meet (cleaner states, tool errors, offsets that cannot
  be stored): Kafka answers an exception that is not an ``ApiException`` with UNKNOWN_SERVER_ERROR
  (``Errors.forException``), and so does kompakt, explicitly.

:class:`KafkaCodedError` is for a rule that names its code itself, as Kafka's admin rules do
(``AdminError`` in :mod:`kompakt.broker.topic_admin`): it answers with the code it carries.

The group coordinator's managers (:mod:`kompakt.broker.groups`) raise a ``GroupError`` subclass per
Kafka exception, and its router turns them into codes with :func:`error_code_for` where Kafka's
``GroupCoordinatorService`` does; answers that complete a parked JoinGroup or SyncGroup carry their
code, as Kafka completes its response futures. The transaction coordinator
(:mod:`kompakt.broker.txn`) likewise returns codes (PRODUCER_FENCED, CONCURRENT_TRANSACTIONS,
INVALID_TXN_STATE...) as Kafka's ``TransactionCoordinator`` does. Other direct codes in handlers
(INVALID_REQUIRED_ACKS, INVALID_TXN_STATE in Produce, INVALID_TOPIC_EXCEPTION in Metadata) are
request checks of that handler alone, written where Kafka's ``KafkaApis`` writes them.
"""

from __future__ import annotations

from kompakt import errors
from kompakt.broker.acl.store import CorruptAclStoreError
from kompakt.broker.groups import errors as group_errors
from kompakt.broker.groups.records.schemas import GroupRecordFormatError
from kompakt.broker.producer_ids import CorruptProducerIdFileError
from kompakt.broker.sasl.store import CorruptCredentialStoreError
from kompakt.broker.txn.log_format import TransactionLogFormatError
from kompakt.broker.txn.state_manager import TransactionLogAppendError
from kompakt.log.manager import InvalidPartitionsError
from kompakt.log.producer_state import CorruptSnapshotError
from kompakt.log.topic_store import CorruptTopicStoreError
from kompakt.protocol.bounds import FrameBoundsError
from kompakt.protocol.codec import ErrorCode, ProtocolError, UnsupportedVersion
from kompakt.protocol.framing import FrameTooLarge


class KafkaCodedError(errors.KompaktError):
    """An error raised with the Kafka error code it is to be answered with.

    For rules that name their code, as Kafka's do (a CreateTopics validation that answers
    INVALID_REPLICATION_FACTOR, a DescribeConfigs on an unknown broker id): the code travels with
    the error instead of being looked up.
    """

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


# Lookups walk the exception's MRO, so an entry covers its subclasses unless they have their own.
_ERROR_CODES: dict[type[BaseException], ErrorCode] = {
    # ---- request errors: the code of Kafka's exception for the same condition
    errors.CorruptRecordError: ErrorCode.corrupt_message,  # CorruptRecordException
    # A payload that does not decompress is a corrupt batch (produce validation says so too).
    errors.CompressionError: ErrorCode.corrupt_message,
    GroupRecordFormatError: ErrorCode.corrupt_message,  # a record of __consumer_offsets
    TransactionLogFormatError: ErrorCode.corrupt_message,  # a record of __transaction_state
    # TransactionStateManager.appendTransactionToLog: a failed write of the coordinator's log
    # (storage error, partition offline) is NOT_COORDINATOR, so the client looks it up again.
    TransactionLogAppendError: ErrorCode.not_coordinator,
    errors.InvalidRecordError: ErrorCode.invalid_record,  # InvalidRecordException
    errors.RecordTooLargeError: ErrorCode.message_too_large,  # RecordTooLargeException
    errors.RecordListTooLargeError: ErrorCode.record_list_too_large,  # RecordBatchTooLargeException
    errors.InvalidTimestampError: ErrorCode.invalid_timestamp,  # InvalidTimestampException
    errors.OffsetOutOfRangeError: ErrorCode.offset_out_of_range,  # OffsetOutOfRangeException
    errors.UnknownTopicOrPartitionError: ErrorCode.unknown_topic_or_partition,
    errors.TopicExistsError: ErrorCode.topic_already_exists,  # TopicExistsException
    errors.InvalidTopicError: ErrorCode.invalid_topic_exception,  # InvalidTopicException
    InvalidPartitionsError: ErrorCode.invalid_partitions,  # InvalidPartitionsException
    errors.ConfigError: ErrorCode.invalid_config,  # ConfigException, InvalidConfigurationException
    errors.ProducerFencedError: ErrorCode.invalid_producer_epoch,  # InvalidProducerEpochException
    errors.OutOfOrderSequenceError: ErrorCode.out_of_order_sequence_number,
    errors.DuplicateSequenceError: ErrorCode.duplicate_sequence_number,
    # The server closes the connection on these, as Kafka's SocketServer does for a request it
    # cannot parse; the entries say what Errors has for them should one ever be answered.
    UnsupportedVersion: ErrorCode.unsupported_version,  # UnsupportedVersionException
    ProtocolError: ErrorCode.invalid_request,  # InvalidRequestException (MalformedRequest too)
    FrameBoundsError: ErrorCode.invalid_request,
    FrameTooLarge: ErrorCode.invalid_request,
    # ---- storage: KafkaStorageException
    OSError: ErrorCode.kafka_storage_error,
    errors.FileOperationError: ErrorCode.kafka_storage_error,
    errors.PartitionOfflineError: ErrorCode.kafka_storage_error,
    errors.CorruptIndexError: ErrorCode.kafka_storage_error,  # one a rebuild could not mend
    errors.CorruptCheckpointError: ErrorCode.kafka_storage_error,
    errors.LogDirectoryError: ErrorCode.kafka_storage_error,
    CorruptTopicStoreError: ErrorCode.kafka_storage_error,
    CorruptAclStoreError: ErrorCode.kafka_storage_error,  # stops the broker at start-up
    CorruptCredentialStoreError: ErrorCode.kafka_storage_error,  # stops the broker at start-up
    CorruptProducerIdFileError: ErrorCode.kafka_storage_error,
    CorruptSnapshotError: ErrorCode.kafka_storage_error,  # recovered from (rebuilt), never answered
    # ---- internal: not ApiExceptions in Kafka either, so Errors.forException's default
    # LogSegmentOffsetOverflowException, IndexOffsetOverflowException, IllegalArgumentException:
    errors.InvalidOffsetError: ErrorCode.unknown_server_error,
    errors.CleaningAbortedError: ErrorCode.unknown_server_error,  # LogCleaningAbortedException
    errors.OffsetMapTooSmallError: ErrorCode.unknown_server_error,
    errors.UncleanablePartitionError: ErrorCode.unknown_server_error,
    errors.IllegalCleanerStateError: ErrorCode.unknown_server_error,  # IllegalStateException
    errors.OperatorError: ErrorCode.unknown_server_error,  # tools and start-up, never a request
    # ---- group coordinator (KIP-848 consumer groups): each is the ApiException of its name
    group_errors.GroupError: ErrorCode.unknown_server_error,  # the base; every raise is a subclass
    group_errors.InvalidGroupRequestError: ErrorCode.invalid_request,
    group_errors.GroupIdNotFoundError: ErrorCode.group_id_not_found,
    group_errors.UnknownMemberIdError: ErrorCode.unknown_member_id,
    group_errors.FencedMemberEpochError: ErrorCode.fenced_member_epoch,
    group_errors.StaleMemberEpochError: ErrorCode.stale_member_epoch,
    group_errors.IllegalGenerationError: ErrorCode.illegal_generation,
    group_errors.GroupMaxSizeReachedError: ErrorCode.group_max_size_reached,
    group_errors.UnsupportedAssignorError: ErrorCode.unsupported_assignor,
    group_errors.UnreleasedInstanceIdError: ErrorCode.unreleased_instance_id,
    group_errors.FencedInstanceIdError: ErrorCode.fenced_instance_id,
    group_errors.InconsistentGroupProtocolError: ErrorCode.inconsistent_group_protocol,
    group_errors.NonEmptyGroupError: ErrorCode.non_empty_group,
    group_errors.UnsupportedGroupVersionError: ErrorCode.unsupported_version,
    group_errors.InvalidRegularExpressionError: ErrorCode.invalid_regular_expression,
    group_errors.InvalidGroupIdError: ErrorCode.invalid_group_id,
    group_errors.InvalidSessionTimeoutError: ErrorCode.invalid_session_timeout,
    group_errors.CoordinatorNotAvailableError: ErrorCode.coordinator_not_available,
    group_errors.RebalanceInProgressError: ErrorCode.rebalance_in_progress,
    group_errors.OffsetMetadataTooLargeError: ErrorCode.offset_metadata_too_large,
}


def mapped_class(exc_type: type[BaseException]) -> type[BaseException] | None:
    """The class whose entry decides ``exc_type``'s code (itself or a base), or None."""
    if issubclass(exc_type, KafkaCodedError):
        return KafkaCodedError
    return next((cls for cls in exc_type.__mro__ if cls in _ERROR_CODES), None)


def error_code_for(exc: BaseException) -> ErrorCode:
    """Kafka's error code for ``exc``; UNKNOWN_SERVER_ERROR for an exception that is no
    KompaktError and no OSError (a bug: the handler logs it)."""
    if isinstance(exc, KafkaCodedError):
        return exc.code
    cls = mapped_class(type(exc))
    return ErrorCode.unknown_server_error if cls is None else _ERROR_CODES[cls]
