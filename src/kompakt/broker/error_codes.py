"""The one place where kompakt exceptions become Kafka error codes."""

from __future__ import annotations

from kompakt import errors
from kompakt.broker.groups import errors as group_errors
from kompakt.protocol.codec import ErrorCode

# Order matters only for subclasses listed before their bases; lookups walk the exception's MRO.
_ERROR_CODES: dict[type[BaseException], ErrorCode] = {
    errors.CorruptRecordError: ErrorCode.corrupt_message,
    errors.InvalidRecordError: ErrorCode.invalid_record,
    errors.RecordTooLargeError: ErrorCode.message_too_large,
    errors.RecordListTooLargeError: ErrorCode.record_list_too_large,
    errors.InvalidTimestampError: ErrorCode.invalid_timestamp,
    errors.OffsetOutOfRangeError: ErrorCode.offset_out_of_range,
    errors.UnknownTopicOrPartitionError: ErrorCode.unknown_topic_or_partition,
    errors.TopicExistsError: ErrorCode.topic_already_exists,
    errors.ConfigError: ErrorCode.invalid_config,
    errors.ProducerFencedError: ErrorCode.invalid_producer_epoch,
    errors.OutOfOrderSequenceError: ErrorCode.out_of_order_sequence_number,
    errors.DuplicateSequenceError: ErrorCode.duplicate_sequence_number,
    errors.PartitionOfflineError: ErrorCode.kafka_storage_error,
    # Group coordinator errors (KIP-848 consumer groups).
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
}


def error_code_for(exc: BaseException) -> ErrorCode:
    """Kafka's error code for ``exc``; UNKNOWN_SERVER_ERROR for anything not mapped."""
    for cls in type(exc).__mro__:
        code = _ERROR_CODES.get(cls)
        if code is not None:
            return code
    return ErrorCode.unknown_server_error
