"""Column layout of the tables the native scans fill: which row of the int64 array holds which field.

:class:`~kompakt.records.scan.BatchTable` and :class:`~kompakt.records.scan.RecordTable` keep one
contiguous int64 row per field, so each column is a cheap slice for the kernels that follow. The
kernels that write a record table themselves (the cleaner's fused retain pass writes the records
it keeps straight into one) and the Python code that reads a column by index both use these
numbers; they are the contract between :mod:`kompakt.records.scan` and
:mod:`kompakt.cleaner.kernels`.

Batch header fields are those of Kafka's ``DefaultRecordBatch`` (base offset, length, partition
leader epoch, magic, CRC, attributes, last offset delta, base and max timestamp, producer id and
epoch, base sequence, record count), plus where the batch starts in the scanned buffer.
"""

from __future__ import annotations

from typing import Final

# Rows of a batch table, shape (B_NCOLS, batches).
B_POSITION: Final = 0  # byte position of the batch in the scanned buffer
B_SIZE: Final = 1  # whole batch, log overhead included (length field + 12)
B_BASE_OFFSET: Final = 2
B_LAST_DELTA: Final = 3
B_ATTRIBUTES: Final = 4
B_EPOCH: Final = 5  # partition leader epoch
B_BASE_TS: Final = 6
B_MAX_TS: Final = 7
B_PID: Final = 8
B_PEPOCH: Final = 9  # producer epoch
B_BASE_SEQ: Final = 10
B_COUNT: Final = 11
B_CRC: Final = 12  # the stored CRC-32C, unsigned
B_NCOLS: Final = 13

# Rows of a record table, shape (R_NCOLS, capacity).
R_OFFSET: Final = 0  # absolute offset: base offset + offset delta
R_POSITION: Final = 1  # where the record's length varint starts
R_LENGTH: Final = 2  # bytes of the whole record, length varint included
R_TIMESTAMP: Final = 3  # absolute: base timestamp + timestamp delta
R_KEY_START: Final = 4
R_KEY_LEN: Final = 5  # -1 for a null key
R_VALUE_START: Final = 6
R_VALUE_LEN: Final = 7  # -1 for a null value (a tombstone)
R_BATCH: Final = 8  # index of the span (batch) the record came from
R_NCOLS: Final = 9
