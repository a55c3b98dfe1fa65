"""Produce request bodies (v3-12) read with their records left in the frame.

kio's reader copies every partition's records into a new ``bytes`` object. For Produce those
records are nearly the whole frame (a megabyte a request with librdkafka's defaults), and the
handler only validates them and writes them to the segment file, so that copy was one more pass
over every byte produced on the event loop's thread (broker profile: ``PyBytes::new`` in kio's
reader, about a tenth of the loop's ``memmove``). This reader builds the same kio
``ProduceRequest`` objects, with each ``records`` a ``memoryview`` into the frame: writable when
the frame is (the server receives large frames into buffers of their own, which nothing reads
after the request), so that the log sets a batch's offsets in place instead of copying it.

It runs only after :mod:`kompakt.protocol.bounds` has checked the frame against the same
layout (every length, count and tag inside the frame), so it does no bounds checks of its own;
a frame that passed the check decodes to the same values as kio's reader (tests compare both).
"""

from __future__ import annotations

import datetime
import functools
import struct
import sys
from collections.abc import Callable
from typing import Any

from kio.index import load_request_schema
from kio.static.protocol import RequestPayload

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PRODUCE = 0
VERSIONS = range(3, 10)
#: Later versions with v9's request layout (v10-12 change only the response and the semantics);
#: librdkafka 2.x sends v10 or later, which kio's reader would otherwise copy record by record set.
LATER_SAME_LAYOUT = range(10, 13)


def reads(version: int) -> bool:
    """Whether this reader reads Produce ``version``."""
    return version in VERSIONS or version in LATER_SAME_LAYOUT


def _uvarint(frame: memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = frame[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _no_tags(frame: memoryview, at: int) -> int:
    """The end of an empty tagged-field section. Produce v9 defines no tagged fields, and kio's
    reader (like the bounds check) refuses one it does not know."""
    count, at = _uvarint(frame, at)
    if count:
        raise ValueError("unknown tagged field in a Produce request")
    return at


def _string(frame: memoryview, at: int, flexible: bool) -> tuple[str | None, int]:
    if flexible:
        size, at = _uvarint(frame, at)
        size -= 1
    else:
        (size,) = _I16.unpack_from(frame, at)
        at += 2
    if size < 0:
        return None, at
    return str(frame[at : at + size], "utf-8"), at + size


def _count(frame: memoryview, at: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        size, at = _uvarint(frame, at)
        size -= 1
    else:
        (size,) = _I32.unpack_from(frame, at)
        at += 4
    if size < 0:  # both arrays of a Produce request are non-nullable, as kio reads them
        raise ValueError("null array in a non-nullable field")
    return size, at


def _records(frame: memoryview, at: int, flexible: bool) -> tuple[memoryview | None, int]:
    if flexible:
        size, at = _uvarint(frame, at)
        size -= 1
    else:
        (size,) = _I32.unpack_from(frame, at)
        at += 4
    if size < 0:
        return None, at
    return frame[at : at + size], at + size


@functools.cache
def _reader(version: int) -> Callable[[memoryview, int], RequestPayload]:
    """The reader of one version, built on its first Produce (start-up loads no Produce schema)."""
    request_class: Any = load_request_schema(_PRODUCE, version)
    module = sys.modules[request_class.__module__]
    topic_class: Any = module.TopicProduceData
    partition_class: Any = module.PartitionProduceData
    flexible = bool(request_class.__flexible__)

    def partitions(frame: memoryview, at: int) -> tuple[tuple[Any, ...], int]:
        count, at = _count(frame, at, flexible)
        read = []
        for _ in range(count):
            (index,) = _I32.unpack_from(frame, at)
            data, at = _records(frame, at + 4, flexible)
            if flexible:
                at = _no_tags(frame, at)
            read.append(partition_class(index=index, records=data))
        return tuple(read), at

    def read(frame: memoryview, at: int) -> RequestPayload:
        transactional_id, at = _string(frame, at, flexible)
        acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, at)
        topics, at = _count(frame, at + _ACKS_TIMEOUT.size, flexible)
        topic_data = []
        for _ in range(topics):
            name, at = _string(frame, at, flexible)
            if name is None:
                raise ValueError("null topic name")
            partition_data, at = partitions(frame, at)
            if flexible:
                at = _no_tags(frame, at)
            topic_data.append(topic_class(name=name, partition_data=partition_data))
        if flexible:
            _no_tags(frame, at)
        result: RequestPayload = request_class(
            transactional_id=transactional_id,
            acks=acks,
            timeout=datetime.timedelta(milliseconds=timeout_ms),
            topic_data=tuple(topic_data),
        )
        return result

    return read


def read_produce(frame: bytes | memoryview, at: int, version: int) -> RequestPayload:
    """The Produce body of a bounds-checked frame starting at ``at``; records are views of it
    (writable when ``frame`` is)."""
    view = memoryview(frame)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return _reader(version)(view, at)
