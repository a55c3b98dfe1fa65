"""Decode request frames in a process of its own, for tests that may abort an interpreter.

Reads ``uint32 size`` + frame records from stdin until EOF; for each frame writes one line to stdout
with an unbuffered ``os.write``: ``ok``, ``malformed <message>``, ``unsupported`` or
``error <type>: <message>`` (an exception that escaped ``decode_request``). When a decode aborts
the process (a failed native allocation), the lines written so far tell the parent which frame did
it. The address space is capped (``RLIMIT_AS``) so that a huge allocation fails here, and fails
loudly, even where the kernel would have overcommitted it.
"""

from __future__ import annotations

import os
import resource
import struct
import sys

from kompakt.protocol import codec
from kompakt.protocol.apis import VersionRange

#: Far above what the decoder needs (~30 MB); a single allocation above it aborts the child.
ADDRESS_SPACE_BYTES = 1 << 30

#: Every version of every key: the frames under test pick their own.
SUPPORTED = {key: VersionRange(0, 0x7FFF) for key in range(128)}


def outcome(frame: bytes) -> str:
    try:
        codec.decode_request(frame, SUPPORTED)
    except codec.MalformedRequest as exc:
        return f"malformed {exc}"
    except codec.UnsupportedVersion:
        return "unsupported"
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the test
        return f"error {type(exc).__name__}: {exc}"
    return "ok"


def main() -> int:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))
    stdin = sys.stdin.buffer
    while header := stdin.read(4):
        (size,) = struct.unpack(">I", header)
        line = outcome(stdin.read(size)).replace("\n", " ") + "\n"
        os.write(1, line.encode("utf-8", "backslashreplace"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
