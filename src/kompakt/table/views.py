"""Table records as JSON, and the arguments people give: keys in an encoding, times as text.

Keys and values are bytes. JSON carries each twice where it can: as text when the bytes are
valid UTF-8 (``key``, ``value``; null otherwise) and always as base64 (``key_base64``,
``value_base64``), so a program never has to guess. A tombstone has both value fields null.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Final

from kompakt import clock
from kompakt.table.partition import Location, Lookup
from kompakt.table.records import TableRecord

KEY_ENCODINGS: Final = ("utf8", "base64", "hex")


class ArgumentError(ValueError):
    """A key, prefix or time that cannot be read as given (HTTP 400, CLI usage error)."""


def decode_key(text: str, encoding: str = "utf8") -> bytes:
    """The key bytes of ``text`` in ``encoding`` (utf8, base64 or hex)."""
    if encoding == "utf8":
        return text.encode("utf-8", errors="surrogateescape")
    if encoding == "base64":
        try:
            padded = text + "=" * (-len(text) % 4)
            return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            raise ArgumentError(f"{text!r} is not base64") from None
    if encoding == "hex":
        try:
            return bytes.fromhex(text)
        except ValueError:
            raise ArgumentError(f"{text!r} is not hex") from None
    raise ArgumentError(f"unknown key encoding {encoding!r} (expected one of {', '.join(KEY_ENCODINGS)})")


def parse_time_ms(text: str) -> int:
    """Epoch milliseconds, or an ISO-8601 time (UTC when no zone is given); a bad value is an
    :class:`ArgumentError` (:func:`kompakt.clock.parse_time_ms`)."""
    try:
        return clock.parse_time_ms(text)
    except ValueError as exc:
        raise ArgumentError(str(exc)) from None


def text_or_none(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def record_json(record: TableRecord) -> dict[str, Any]:
    return {
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": text_or_none(record.key),
        "key_base64": b64(record.key),
        "tombstone": record.value is None,
        "value": text_or_none(record.value),
        "value_base64": b64(record.value),
        "headers": [{"key": k, "value": text_or_none(v), "value_base64": b64(v)} for k, v in record.headers],
    }


def location_json(location: Location | None) -> dict[str, Any] | None:
    if location is None:
        return None
    return {
        "segment_base_offset": location.segment_base_offset,
        "segment": f"{location.segment_base_offset:020d}.log",
        "position": location.position,
        "batch_base_offset": location.batch_base_offset,
        "batch_last_offset": location.batch_last_offset,
        "batch_size": location.batch_size,
        "section": location.section,
    }


def lookup_json(topic: str, partition: int, key: bytes, found: Lookup) -> dict[str, Any]:
    """A lookup's answer: ``found`` (a live value), the record (also for a tombstone), where it lives."""
    out: dict[str, Any] = {
        "topic": topic,
        "partition": partition,
        "key": text_or_none(key),
        "key_base64": b64(key),
        "found": found.found,
        "tombstone": found.record is not None and found.record.value is None,
    }
    if found.record is not None:
        out.update({k: v for k, v in record_json(found.record).items() if k not in ("key", "key_base64")})
    out["location"] = location_json(found.location)
    return out
