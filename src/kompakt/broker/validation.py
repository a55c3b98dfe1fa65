"""Produce-side validation of one partition's records, in Kafka's order and with Kafka's messages.

Kafka's ``UnifiedLog.analyzeAndValidateRecords`` and ``LogValidator.validateMessagesAndAssignOffsets``. The
checks, in order (any failure rejects the partition's whole record set and nothing is appended):

1. framing, then per batch: a v2 batch must have base offset 0 (INVALID_RECORD); its size must
   not exceed the topic's ``max.message.bytes`` (MESSAGE_TOO_LARGE); its CRC must match
   (CORRUPT_MESSAGE);
2. magic 2 only, and exactly one batch (INVALID_RECORD);
3. batch header rules: no control batches from clients, a record count that matches the offset
   range, a sequence for idempotent batches, no client-set LogAppendTime (INVALID_TIMESTAMP);
4. per record, computed from the native record scan (decompressing first when the batch is
   compressed, never a Python loop per record): a null key on a compacted topic, then a
   CreateTime timestamp outside ``[now - before.max, now + after.max]``. Each offending record
   yields one ``(batch_index, message)`` record error; like Kafka, any timestamp error makes the
   partition error INVALID_TIMESTAMP, otherwise INVALID_RECORD with the "first three errors"
   message;
5. contiguous relative offsets 0..count-1 (INVALID_RECORD);
6. the batch must fit a segment (RECORD_LIST_TOO_LARGE).

The broker then appends with ``log_append_time_ms`` set when the topic uses LogAppendTime, and
the log overwrites the batch's max timestamp and timestamp type (``set_max_timestamp_log_append``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from kompakt.config.defs import LONG_MAX, LONG_MIN
from kompakt.errors import (
    CompressionError,
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordListTooLargeError,
    RecordTooLargeError,
)
from kompakt.lazy_import import LazyModule
from kompakt.log.config import LogConfig
from kompakt.records.batch import (
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    MAGIC_V2,
    RecordBatchView,
    TimestampType,
)
from kompakt.records.compression import Compression, decompress

if TYPE_CHECKING:
    import numpy as np
else:
    np = LazyModule("numpy", globals(), "np")  # loaded on first use, not at broker start

LOG_APPEND_TIME: Final = "LogAppendTime"
_MAGIC_OFFSET: Final = 16


class RecordErrorsInvalid(InvalidRecordError):
    """INVALID_RECORD with per-record errors; ``null_key_records`` feeds Kafka's meter."""

    def __init__(
        self, message: str, record_errors: tuple[tuple[int, str], ...], null_key_records: int
    ) -> None:
        super().__init__(message, record_errors)
        self.null_key_records = null_key_records


class RecordErrorsTimestamp(InvalidTimestampError):
    """INVALID_TIMESTAMP with per-record errors (Kafka reports them the same way)."""

    def __init__(
        self, message: str, record_errors: tuple[tuple[int, str], ...], null_key_records: int
    ) -> None:
        super().__init__(message)
        self.record_errors = record_errors
        self.null_key_records = null_key_records


@dataclass(frozen=True, slots=True)
class ValidatedBatch:
    """A record set that passed validation: exactly one v2 batch, ready to append."""

    batch: memoryview
    records_count: int
    #: Set when the topic uses LogAppendTime: the broker's time, stamped on append.
    log_append_time_ms: int | None


def _java_list(errors: tuple[tuple[int, str], ...]) -> str:
    """Kafka's ``List<RecordError>.toString()``, which clients show verbatim."""
    items = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors)
    return f"[{items}]"


def _frame(records: memoryview, tp: str) -> list[RecordBatchView]:
    """Split the record set into batch views; anything that does not frame is corrupt."""
    views: list[RecordBatchView] = []
    pos, end = 0, len(records)
    while pos < end:
        if end - pos < LOG_OVERHEAD + 5:
            raise CorruptRecordError(
                f"Record set of {end} bytes in the append to {tp} ends with a truncated batch header "
                f"at position {pos}."
            )
        view = RecordBatchView(records, pos)
        size = view.size
        if size < BATCH_OVERHEAD or pos + size > end:
            raise CorruptRecordError(
                f"Record batch at position {pos} in the append to {tp} declares {size} bytes, "
                f"but {end - pos} bytes are left (minimum {BATCH_OVERHEAD})."
            )
        views.append(view)
        pos += size
    return views


def _check_batches(views: list[RecordBatchView], tp: str, config: LogConfig) -> None:
    for view in views:
        magic = int(view.buf[view.position + _MAGIC_OFFSET])
        if magic >= MAGIC_V2 and view.base_offset != 0:
            raise InvalidRecordError(
                f"The baseOffset of the record batch in the append to {tp} should be 0, "
                f"but it is {view.base_offset}"
            )
        if view.size > config.max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch size in the append to {tp} is {view.size} bytes which exceeds the "
                f"maximum configured value of {config.max_message_bytes}."
            )
        if magic == MAGIC_V2 and view.crc != view.compute_crc():
            raise CorruptRecordError(f"Record is corrupt (stored crc = {view.crc}) in topic partition {tp}.")
    for view in views:
        magic = int(view.buf[view.position + _MAGIC_OFFSET])
        if magic != MAGIC_V2:
            raise InvalidRecordError(
                f"Produce requests to {tp} must only contain record batches with magic version 2 "
                f"(found magic {magic})"
            )
    if len(views) != 1:
        raise InvalidRecordError(
            "Record batch has no batches at all"
            if not views
            else "Compressed outer record has more than one batch"
        )


def _check_header(view: RecordBatchView, tp: str) -> None:
    count = view.records_count
    from_offsets = view.last_offset_delta + 1
    if from_offsets <= 0:
        raise InvalidRecordError(
            f"Batch has an invalid offset range: [{view.base_offset}, {view.last_offset}] "
            f"in topic partition {tp}."
        )
    if count <= 0:
        raise InvalidRecordError(f"Invalid reported count for record batch: {count} in topic partition {tp}.")
    if from_offsets != count:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [{view.base_offset}, {view.last_offset}] "
            f"and count of records {count} in topic partition {tp}."
        )
    if view.is_control:
        raise InvalidRecordError(f"Clients are not allowed to write control records in topic partition {tp}.")
    if view.has_producer_id and view.base_sequence < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {view.base_sequence} in record batch with producerId "
            f"{view.producer_id} in topic partition {tp}."
        )
    if view.timestamp_type == TimestampType.LOG_APPEND_TIME:
        raise InvalidTimestampError(
            f"Invalid timestamp type in the record batch for {tp}. "
            "Producer should not set timestamp type to LogAppendTime."
        )


def _scan(view: RecordBatchView, tp: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(offset_delta, timestamp, key_len)`` per record, via the native kernel."""
    if view.compression == Compression.NONE:
        buf = np.frombuffer(view.buf, dtype=np.uint8)
        start, end = view.position + BATCH_OVERHEAD, view.position + view.size
    else:
        try:
            payload = decompress(view.compression, view.records_section)
        except CompressionError as exc:
            raise CorruptRecordError(
                f"Cannot decompress the record batch in the append to {tp}: {exc}"
            ) from exc
        buf = np.frombuffer(payload, dtype=np.uint8)
        start, end = 0, len(payload)

    def one(value: int) -> np.ndarray:
        return np.array([value], dtype=np.int64)

    try:
        from kompakt.records.scan import scan_records  # numba loads on first use, not at startup

        table = scan_records(
            buf, one(start), one(end), one(0), one(view.base_timestamp), one(view.records_count)
        )
    except CorruptRecordError as exc:
        raise InvalidRecordError(f"Found invalid record structure in the append to {tp}: {exc}") from exc
    return table.offset.copy(), table.timestamp.copy(), table.key_len.copy()


def validate_produce(
    records: bytes | bytearray | memoryview, topic: str, partition: int, config: LogConfig, now_ms: int
) -> ValidatedBatch:
    """Validate one partition's record set from a Produce request; raise the Kafka-mapped error."""
    tp = f"{topic}-{partition}"
    data = memoryview(records)
    views = _frame(data, tp)
    _check_batches(views, tp, config)
    view = views[0]
    _check_header(view, tp)
    offsets, timestamps, key_lens = _scan(view, tp)

    errors: dict[int, str] = {}
    null_keys = 0
    if config.compact:
        null_key_rows = np.flatnonzero(key_lens < 0)
        null_keys = len(null_key_rows)
        message = f"Compacted topic cannot accept message without key in topic partition {tp}."
        errors.update(dict.fromkeys(null_key_rows.tolist(), message))
    log_append = config.message_timestamp_type == LOG_APPEND_TIME
    ts_error_count = 0
    if not log_append:
        lower = max(now_ms - config.message_timestamp_before_max_ms, LONG_MIN)
        upper = min(now_ms + config.message_timestamp_after_max_ms, LONG_MAX)
        bad = (timestamps < lower) | (timestamps > upper)
        if null_keys:
            bad &= key_lens >= 0  # a record reports its key error first, as Kafka's validateRecord
        bad_rows = np.flatnonzero(bad)
        ts_error_count = len(bad_rows)
        for index in bad_rows.tolist():
            errors[int(index)] = (
                f"Timestamp {int(timestamps[index])} of message with offset {int(index)} is out of range. "
                f"The timestamp should be within [{lower}, {upper}]"
            )
    if errors:
        # Only reached when records are rejected, so building the full list per record is fine.
        all_errors = tuple(sorted(errors.items()))
        if ts_error_count:
            raise RecordErrorsTimestamp(
                "One or more records have been rejected due to invalid timestamp", all_errors, null_keys
            )
        raise RecordErrorsInvalid(
            f"One or more records have been rejected due to {len(all_errors)} record errors in total, "
            f"and only showing the first three errors at most: {_java_list(all_errors[:3])}",
            all_errors,
            null_keys,
        )
    if not np.array_equal(offsets, np.arange(len(offsets), dtype=np.int64)):
        first_bad = int(np.flatnonzero(offsets != np.arange(len(offsets), dtype=np.int64))[0])
        raise InvalidRecordError(
            f"Record offsets in the append to {tp} must be contiguous from 0: record {first_bad} has "
            f"offset delta {int(offsets[first_bad])}"
        )
    if view.size > config.segment_size:
        raise RecordListTooLargeError(
            f"Message batch size is {view.size} bytes in append to partition {tp} which exceeds the "
            f"maximum configured segment size of {config.segment_size}."
        )
    return ValidatedBatch(
        batch=data[view.position : view.position + view.size],
        records_count=view.records_count,
        log_append_time_ms=now_ms if log_append else None,
    )
