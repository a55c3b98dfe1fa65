"""Compile (or load from numba's on-disk cache) every cleaner kernel by cleaning a tiny log.

numba compiles a kernel on its first call and caches the machine code on disk (``cache=True``),
so the first compaction after ``pip install`` spends 5-20 s compiling (8 s on the idle 2-core
development machine) and every later one loads the cache in a fraction of a second. Three ways
move that cost out of the first real clean:

* ``kompakt warmup`` (or ``python -m kompakt.cleaner.warmup``) compiles now; ``make run`` and
  ``make test`` do it after installing;
* ``kompakt serve`` looks for the cache at start (:func:`kernels_cached`, a few ``stat`` calls)
  and, when it is missing, compiles in a background process (:class:`BackgroundWarmup`) that does
  not hold the broker's GIL or delay ``kompakt ready``; the cleaner threads wait for it before
  their first clean, then load the cache;
* the offline tools say so before they compile (``compiling native kernels, first run only``).

All of this is the fallback now: a wheel install carries the kernels compiled ahead of time
(:mod:`kompakt.records.precompiled`), and :func:`kernels_ready` is then true from the first
second, so nothing compiles and nothing waits. The JIT path remains for installs without them
(an editable install before ``make native``, a platform the build could not compile for) and
for ``KOMPAKT_KERNELS=jit``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

COMPILE_ESTIMATE = "typically 5-20 s"
"""What the first compile costs, for messages (7.9 s measured on the idle 2-core development machine)."""
WAIT_LIMIT_S = 300.0
"""How long a cleaner thread waits for the background compile before compiling itself."""


def warm_up() -> float:
    """Clean a small log with raw and compressed batches and tombstones; return the seconds taken."""
    from kompakt.cleaner.cleaner import Cleaner
    from kompakt.cleaner.offset_map import HashedOffsetMap
    from kompakt.clock import FakeClock
    from kompakt.log.config import LogConfig
    from kompakt.log.partition_log import PartitionLog
    from kompakt.records.builder import SimpleRecord, build_batch
    from kompakt.records.compression import Compression

    started = time.monotonic()
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "warmup-0"
        directory.mkdir()
        config = LogConfig.from_overrides({"cleanup.policy": "compact", "internal.segment.bytes": "4096"})
        log = PartitionLog(directory, "warmup", 0, config, clock)

        def append(first: int, end: int) -> None:
            for i in range(first, end):
                codec = Compression.ZSTD if i % 3 == 0 else Compression.NONE
                value = None if i % 7 == 0 else b"value"
                batch = [
                    SimpleRecord(str(i % 11).encode(), value, clock.now_ms()),
                    SimpleRecord(b"x", b"y", 0),
                ]
                log.append(build_batch(batch, compression=codec))

        append(0, 200)
        cleaner = Cleaner(0, HashedOffsetMap(1 << 20, 0.9), clock)
        cleaner.clean(log, 0, log.active_segment.base_offset)
        # A transactional batch (its transaction still open), which the map pass puts on its own.
        txn = [SimpleRecord(b"t", b"v", clock.now_ms())]
        log.append(build_batch(txn, producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True))
        append(200, 300)
        clock.advance(86_400_001)
        cleaner.clean(log, 0, log.active_segment.base_offset)
        log.close()
    write_stamp()
    return time.monotonic() - started


STAMP = "kompakt-warmup.stamp"
"""Written beside numba's cache by a successful :func:`warm_up`."""


def _kernel_sources() -> list[Path]:
    """The modules that hold numba kernels: ``kompakt.cleaner`` (its ``kernels`` package) and
    ``kompakt.records`` (record scanning), found by their ``@njit``."""
    package = Path(__file__).resolve().parent.parent
    found = []
    for root in (package / "cleaner", package / "records"):
        for path in sorted(root.rglob("*.py")):
            if path.resolve() == Path(__file__).resolve():
                continue
            try:
                if "@njit(" in path.read_text(encoding="utf-8"):
                    found.append(path)
            except OSError:
                continue
    return found


def _cache_dirs(source: Path) -> list[Path]:
    """Where numba's locators put the cache of ``source``, in the order numba tries them:
    ``$NUMBA_CACHE_DIR`` (then nowhere else), the ``__pycache__`` beside it, the user-wide cache
    (``numba.core.caching``'s locators)."""
    directory = str(source.parent)
    subpath = f"{source.parent.name}_{hashlib.sha1(directory.encode()).hexdigest()}"  # noqa: S324 - numba's own key
    if os.environ.get("NUMBA_CACHE_DIR"):
        return [Path(os.environ["NUMBA_CACHE_DIR"]) / subpath]
    user_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return [source.parent / "__pycache__", user_cache / "numba" / subpath]


def write_stamp(sources: list[Path] | None = None) -> Path | None:
    """Mark the cache warm, in the first of numba's cache directories that can be written (the
    one numba itself used); None when none can."""
    found = _kernel_sources() if sources is None else sources
    if not found:
        return None
    for directory in _cache_dirs(found[0]):
        try:
            directory.mkdir(parents=True, exist_ok=True)
            stamp = directory / STAMP
            stamp.write_text("\n".join(str(p) for p in found) + "\n", encoding="utf-8")
            return stamp
        except OSError:
            continue
    return None


def kernels_cached(sources: list[Path] | None = None) -> bool:
    """Whether a warm-up has compiled the kernels since their sources last changed.

    Cheap (no numba import): a few ``stat`` calls. numba caches per function, and a module's
    inlined helpers or unused kernels have no cache entry of their own, so the check is the stamp
    :func:`warm_up` writes beside numba's cache, newer than every kernel source. A false "not
    cached" costs one background process that loads the cache and exits; a deleted cache takes
    the stamp with it (same directory).
    """
    found = _kernel_sources() if sources is None else sources
    if not found:
        return True
    newest = max(p.stat().st_mtime for p in found)
    for directory in _cache_dirs(found[0]):
        stamp = directory / STAMP
        if stamp.is_file() and stamp.stat().st_mtime >= newest:
            return True
    return False


def kernels_ready() -> bool:
    """Whether a clean can start without compiling: the kernels are precompiled in this install
    and usable (:mod:`kompakt.records.precompiled`, checked without loading them), or numba's
    cache is warm."""
    from kompakt.records import precompiled

    return precompiled.check().precompiled or kernels_cached()


class BackgroundWarmup:
    """``python -m kompakt.cleaner.warmup --background`` in a child process, started when the
    cache is missing; :meth:`wait` blocks a cleaner thread until it has finished.

    A process, not a thread: compiling holds the GIL for seconds at a time, which would stall the
    broker's request handling.
    """

    def __init__(self, command: list[str] | None = None, cached: Callable[[], bool] = kernels_ready) -> None:
        self._command = command or [sys.executable, "-m", "kompakt.cleaner.warmup", "--background"]
        self._cached = cached
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._stopped = False
        self._done = threading.Event()
        self._done.set()

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    @property
    def started_process(self) -> bool:
        """Whether a compile process was started (False when the cache was there)."""
        return self._process is not None

    def start(self) -> None:
        """Check the cache and, when it is missing, compile, all in a background thread (the
        check reads the kernel sources: ~10 ms kept off the start-up path)."""
        self._done.clear()
        threading.Thread(target=self._run, name="kompakt-warmup", daemon=True).start()

    def _run(self) -> None:
        try:
            if self._cached():
                return
            with self._lock:
                if self._stopped:
                    return
                self._process = subprocess.Popen(
                    self._command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
            logger.info(
                "Compiling the native cleaner kernels in a background process, first run only (%s); "
                "compaction starts when they are ready",
                COMPILE_ESTIMATE,
            )
            self._reap(self._process)
        except OSError as exc:
            logger.warning("Cannot start the background compile of the native kernels: %s", exc)
        finally:
            self._done.set()

    def _reap(self, process: subprocess.Popen[bytes]) -> None:
        _out, err = process.communicate()
        if process.returncode == 0:
            logger.info("Native cleaner kernels ready")
        elif process.returncode > 0:
            logger.warning(
                "Compiling the native kernels in the background failed (exit %s): %s; the cleaner "
                "compiles them itself",
                process.returncode,
                err.decode("utf-8", "replace").strip().splitlines()[-1:] or "",
            )

    def wait(self, timeout_s: float = WAIT_LIMIT_S) -> bool:
        """Block until the background compile is over (at most ``timeout_s``); True if it is."""
        return self._done.wait(timeout_s)

    def stop(self) -> None:
        """Stop an unfinished compile (the broker is shutting down; the next start redoes it)."""
        with self._lock:
            self._stopped = True
            if self._process is not None and self._process.poll() is None:
                self._process.terminate()


def main(argv: list[str]) -> int:
    if "--background" in argv:
        # Normal priority: the cleaner threads wait for this, so it should end soon (it is a
        # process of its own, so it does not hold the broker's GIL).
        warm_up()
        return 0
    print(f"cleaner kernels ready in {warm_up():.2f} s")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
