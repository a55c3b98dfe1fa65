"""Decode frames in a child process (``decode_child.py``), so that a decode that aborts the
interpreter fails one test with the frame that did it, instead of killing the pytest worker."""

from __future__ import annotations

import contextlib
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

CHILD = Path(__file__).with_name("decode_child.py")


class DecoderDied(AssertionError):
    """The child process died while decoding ``frame`` (the ``index``-th of its batch)."""

    def __init__(self, index: int, frame: bytes, returncode: int, stderr: str) -> None:
        tail = "\n".join(stderr.strip().splitlines()[:3])
        super().__init__(
            f"decoding frame {index} killed the interpreter (exit status {returncode}): {frame.hex()}\n{tail}"
        )
        self.index = index
        self.frame = frame
        self.returncode = returncode


class IsolatedDecoder:
    """A long-lived decoding child; restarted after it dies, so later batches still run."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None

    def decode(self, frames: Sequence[bytes]) -> list[str]:
        """One outcome line per frame (see ``decode_child.py``); :class:`DecoderDied` if it died."""
        proc = self._proc if self._proc is not None else self._start()
        assert proc.stdin is not None and proc.stdout is not None
        payload = b"".join(struct.pack(">I", len(frame)) + frame for frame in frames)
        writer = threading.Thread(target=_write, args=(proc.stdin, payload), daemon=True)
        writer.start()
        outcomes: list[str] = []
        while len(outcomes) < len(frames):
            line = proc.stdout.readline()
            if not line:
                break
            outcomes.append(line.decode().rstrip("\n"))
        writer.join()
        if len(outcomes) < len(frames):
            returncode = proc.wait(timeout=30)
            stderr = self._read_stderr()
            self._proc = None
            raise DecoderDied(len(outcomes), frames[len(outcomes)], returncode, stderr)
        return outcomes

    def close(self) -> None:
        if self._proc is not None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            self._proc.wait(timeout=30)
            self._proc = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _start(self) -> subprocess.Popen[bytes]:
        if self._stderr is not None:
            self._stderr.close()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the child, closed in close()
        self._proc = subprocess.Popen(
            [sys.executable, str(CHILD)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
        )
        return self._proc

    def _read_stderr(self) -> str:
        assert self._stderr is not None
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")


def _write(stream: IO[bytes], payload: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, OSError):
        stream.write(payload)
        stream.flush()
