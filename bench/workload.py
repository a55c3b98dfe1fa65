"""The performance anchor's workload, built fast: uncompressed v2 batches of keyed records.

Shared by the kernel and cleaner benchmarks. One records-section template is copied into every
batch and the keys are scattered in with numpy, so building 600 MB takes seconds, not minutes.
"""

from __future__ import annotations

import struct

import crc32c
import numpy as np
import numpy.typing as npt

U8 = npt.NDArray[np.uint8]
KEY_WIDTH = 11
VALUE_SIZE = 100


def varint(value: int) -> bytes:
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def build_log(total_bytes: int, per_batch: int, n_keys: int, seed: int) -> tuple[U8, int]:
    """Vectorised build: one records-section template, keys scattered into every copy of it."""
    rng = np.random.default_rng(seed)
    template = bytearray()
    key_pos = []
    for od in range(per_batch):
        body_tail = varint(KEY_WIDTH) + b"k" * KEY_WIDTH + varint(VALUE_SIZE) + b"v" * VALUE_SIZE + varint(0)
        body = b"\x00" + varint(0) + varint(od) + body_tail
        rec = varint(len(body)) + body
        key_pos.append(len(template) + len(rec) - len(body_tail) + len(varint(KEY_WIDTH)))
        template += rec
    batch_size = 61 + len(template)
    n_batches = max(1, total_bytes // batch_size)
    buf = np.empty(n_batches * batch_size, dtype=np.uint8)
    view = buf.reshape(n_batches, batch_size)
    view[:, 61:] = np.frombuffer(bytes(template), dtype=np.uint8)
    key_ids = rng.integers(0, n_keys, size=(n_batches, per_batch))
    digits = (
        np.array([b"key-%07d" % i for i in range(n_keys)], dtype="S11")
        .view(np.uint8)
        .reshape(n_keys, KEY_WIDTH)
    )
    cols = np.asarray(key_pos)[:, None] + np.arange(KEY_WIDTH)[None, :]
    view[:, 61 + cols] = digits[key_ids]
    for b in range(n_batches):
        base_offset = b * per_batch
        ts = 1_700_000_000_000 + b
        header_tail = struct.pack(">hiqqqhii", 0, per_batch - 1, ts, ts, -1, -1, -1, per_batch)
        view[b, 21:61] = np.frombuffer(header_tail, dtype=np.uint8)
        crc = crc32c.crc32c(view[b, 21:].data)
        view[b, :21] = np.frombuffer(struct.pack(">qiibI", base_offset, batch_size - 12, 0, 2, crc), np.uint8)
    return buf, n_batches * per_batch
