"""Hand-built v2 batches and a slow pure-Python record parser: the model the native record scans
(``kompakt.records.scan``) and the cleaner's kernels are checked against.

Deliberately independent of ``kompakt.records``' builders and readers, so these tests exercise the
native code alone.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import crc32c


def zigzag(value: int) -> int:
    return ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF


def varint(value: int) -> bytes:
    raw = zigzag(value)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    raw = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


@dataclass
class Rec:
    key: bytes | None
    value: bytes | None
    timestamp_delta: int = 0
    offset_delta: int | None = None  # defaults to the index in the batch
    headers: list[tuple[bytes, bytes | None]] = field(default_factory=list)


def encode_record(r: Rec, offset_delta: int) -> bytes:
    body = bytearray(b"\x00")
    body += varint(r.timestamp_delta) + varint(offset_delta)
    body += varint(-1) if r.key is None else varint(len(r.key)) + r.key
    body += varint(-1) if r.value is None else varint(len(r.value)) + r.value
    body += varint(len(r.headers))
    for hk, hv in r.headers:
        body += varint(len(hk)) + hk
        body += varint(-1) if hv is None else varint(len(hv)) + hv
    return varint(len(body)) + bytes(body)


def encode_batch(
    base_offset: int,
    records: list[Rec],
    *,
    base_timestamp: int = 1_000,
    max_timestamp: int | None = None,
    attributes: int = 0,
    last_offset_delta: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    leader_epoch: int = 0,
    magic: int = 2,
    count: int | None = None,
) -> bytes:
    payload = b"".join(
        encode_record(r, i if r.offset_delta is None else r.offset_delta) for i, r in enumerate(records)
    )
    lod = len(records) - 1 if last_offset_delta is None else last_offset_delta
    mts = (
        base_timestamp + max((r.timestamp_delta for r in records), default=0)
        if max_timestamp is None
        else max_timestamp
    )
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            lod,
            base_timestamp,
            mts,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records) if count is None else count,
        )
        + payload
    )
    crc = crc32c.crc32c(after_crc)
    size = 61 + len(payload)
    return struct.pack(">qiibI", base_offset, size - 12, leader_epoch, magic, crc) + after_crc


@dataclass
class Parsed:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[bytes, bytes | None]]


def parse_records(buf: bytes, start: int, end: int, base_offset: int, base_timestamp: int) -> list[Parsed]:
    """Slow reference parser for a records section."""
    out = []
    pos = start
    while pos < end:
        length, pos = read_varint(buf, pos)
        rec_end = pos + length
        pos += 1
        ts, pos = read_varint(buf, pos)
        od, pos = read_varint(buf, pos)
        kl, pos = read_varint(buf, pos)
        key = None if kl < 0 else buf[pos : pos + kl]
        pos += max(kl, 0)
        vl, pos = read_varint(buf, pos)
        value = None if vl < 0 else buf[pos : pos + vl]
        pos += max(vl, 0)
        hc, pos = read_varint(buf, pos)
        headers = []
        for _ in range(hc):
            hkl, pos = read_varint(buf, pos)
            hk = buf[pos : pos + hkl]
            pos += hkl
            hvl, pos = read_varint(buf, pos)
            hv = None if hvl < 0 else buf[pos : pos + hvl]
            pos += max(hvl, 0)
            headers.append((hk, hv))
        assert pos == rec_end
        out.append(Parsed(base_offset + od, base_timestamp + ts, key, value, headers))
    return out
