"""The kernels compiled ahead of time (``kompakt._native``) against numba's JIT of the same source,
and when the precompiled ones are used (issue 17: no compile on the first run after an install).

``make test`` builds them into the source tree (``make native``) and warms the JIT cache, so
both are there: the suite runs on the precompiled kernels, as a wheel install does, and this
module compares every entry point with its JIT twin call by call.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from kompakt.records import precompiled

pytestmark = pytest.mark.xdist_group("precompiled")


def _native() -> Any:
    if not precompiled.status().precompiled:
        pytest.fail(f"the test run should use the precompiled kernels (make native): {precompiled.status()}")
    return importlib.import_module(precompiled.EXTENSION)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple):
        return (
            isinstance(b, tuple) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return bool(a == b) and type(a) is type(b)


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Route every entry point through a wrapper that calls the precompiled function and the JIT
    dispatcher on copies of the same arguments, and fails on any difference in the result or in
    what they wrote into their arguments. Yields the call count per entry point."""
    native = _native()
    calls: dict[str, int] = dict.fromkeys(precompiled.ENTRY_POINTS, 0)
    failures: list[str] = []

    def wrap(symbol: str, aot: Callable[..., Any], jit: Callable[..., Any]) -> Callable[..., Any]:
        def both(*args: Any) -> Any:
            jit_args = [a.copy() if isinstance(a, np.ndarray) and a.flags.writeable else a for a in args]
            got = aot(*args)
            want = jit(*jit_args)
            calls[symbol] += 1
            if not _same(got, want):
                failures.append(f"{symbol}: precompiled {got!r} != jit {want!r}")
            for i, (a, b) in enumerate(zip(args, jit_args, strict=True)):
                if isinstance(a, np.ndarray) and not np.array_equal(a, b):
                    failures.append(f"{symbol}: argument {i} written differently")
            return got

        return both

    # Import every user of the kernels first: some bind an entry point by name at import
    # (``from kompakt.table.kernels import gather``), so each binding is replaced, not only the
    # kernel module's own.
    for name in (
        "kompakt.cleaner.warmup",
        "kompakt.table.warmup",
        "kompakt.table.diff",
        "kompakt.table.export",
    ):
        importlib.import_module(name)
    wrappers = {}
    for symbol, entry in precompiled.ENTRY_POINTS.items():
        module = sys.modules[entry.dispatcher.__module__]
        assert getattr(module, entry.dispatcher.__name__) is getattr(native, symbol), symbol
        wrappers[id(getattr(native, symbol))] = wrap(symbol, getattr(native, symbol), entry.dispatcher)
    for module in [m for name, m in sys.modules.items() if name.startswith("kompakt.")]:
        for attr, value in list(vars(module).items()):
            if id(value) in wrappers:
                monkeypatch.setattr(module, attr, wrappers[id(value)])
    yield calls
    assert not failures, failures[:5]


def test_every_entry_point_is_precompiled_in_the_test_run() -> None:
    native = _native()
    manifest = json.loads(
        (precompiled.PACKAGE / precompiled.MANIFEST).read_text(encoding="utf-8")
        if (precompiled.PACKAGE / precompiled.MANIFEST).exists()
        else "{}"
    )
    from kompakt.aot_build import KERNEL_MODULES

    for name in KERNEL_MODULES:
        importlib.import_module(name)
    assert set(precompiled.ENTRY_POINTS) <= set(dir(native))
    assert manifest.get("exports", sorted(precompiled.ENTRY_POINTS)) == sorted(precompiled.ENTRY_POINTS)
    from kompakt.cleaner.warmup import kernels_ready

    assert kernels_ready()


def test_precompiled_and_jit_kernels_agree_on_cleans_tables_and_the_offset_map(
    compared: dict[str, int],
) -> None:
    from kompakt.cleaner.kernels.rewrite import rewrite_records
    from kompakt.cleaner.offset_map import HashedOffsetMap, RecordKeys
    from kompakt.cleaner.warmup import warm_up
    from kompakt.records.builder import SimpleRecord, build_batch
    from kompakt.records.scan import scan_batch_records, scan_batches
    from kompakt.table.index import KeyIndex
    from kompakt.table.warmup import warm_up as warm_up_table

    warm_up()
    warm_up_table()
    # The per-record offset-map API, which the fused span passes of a clean do not use.
    records = [SimpleRecord(f"k{i % 37}".encode(), None if i % 5 == 0 else b"v", i) for i in range(300)]
    records.append(SimpleRecord(None, b"no key", 0))
    buf = np.frombuffer(bytes(build_batch(records)), dtype=np.uint8)
    table = scan_batch_records(buf, scan_batches(buf))
    keys = RecordKeys.of(buf, table.key_start, table.key_len)
    offsets = table.offset
    omap = HashedOffsetMap(1 << 16, 0.9, initial_slots=16)  # small: the puts grow the table
    omap.put(b"solo", 7)
    assert omap.get(b"solo") == 7
    omap.put_records(keys, offsets, 0)
    latest = omap.get_many(keys)
    kept = omap.retain_mask(keys, offsets, table.value_len, np.zeros(len(offsets), dtype=np.bool_))
    assert latest[-1] == -1 and latest[0] == 296 and not kept.keep[0]
    # One batch re-encoded record by record (the clean rewrites whole runs of batches at once).
    out = np.zeros(len(buf) + 11 * len(offsets), dtype=np.uint8)
    keep = np.ones(len(offsets), dtype=np.bool_)
    written = rewrite_records(buf, table.position, table.length, table.timestamp, keep, 0, out)
    assert written > 0
    # The same batch renumbered with original-offset headers (backup and restore, issue 33).
    from kompakt.records.rebuild import HEADER_ORIGINAL_OFFSET, rebuild_records

    value_end = table.value_start + np.maximum(table.value_len, 0)
    n = len(offsets)
    section = rebuild_records(
        buf,
        table.position,
        table.length,
        value_end,
        np.arange(n),
        table.timestamp,
        original_offset=offsets,
        headers=HEADER_ORIGINAL_OFFSET,
    )
    assert len(section) > written
    # The table index's per-record apply, growing past its first capacity (a rehash).
    index = KeyIndex()
    index.apply(keys.hash_hi, keys.hash_lo, offsets, table.key_len, table.value_len)
    many = np.arange(5000, dtype=np.uint64)
    index.apply(
        many,
        many * np.uint64(3),
        np.arange(5000, dtype=np.int64),
        np.ones(5000, np.int64),
        np.ones(5000, np.int64),
    )
    assert len(index) > 5000
    assert all(calls > 0 for calls in compared.values()), [s for s, n in compared.items() if n == 0]


def test_a_precompiled_kernel_lets_other_threads_run() -> None:
    """The JIT kernels are nogil, so the broker's event loop runs during a clean; the build
    compiles the precompiled ones with the GIL released too."""
    hash_keys = _native().cleaner_kernels_hashing__hash_keys
    n, width = 6000, 1 << 20
    buf = np.full(width, 7, dtype=np.uint8)
    starts, lens = np.zeros(n, dtype=np.int64), np.full(n, width, dtype=np.int64)
    hi, lo = np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint64)
    started, span = threading.Event(), {}

    def work() -> None:
        started.set()
        begin = time.monotonic()
        hash_keys(buf, starts, lens, hi, lo)
        span["begin"], span["end"] = begin, time.monotonic()

    worker = threading.Thread(target=work)
    worker.start()
    started.wait()
    time.sleep(0.02)
    ran_at = time.monotonic()  # reached only while the worker's kernel runs if it dropped the GIL
    worker.join()
    assert span["end"] - span["begin"] > 0.2, "make the kernel call longer"
    assert ran_at < span["begin"] + (span["end"] - span["begin"]) / 2


def test_a_stale_or_missing_build_falls_back_to_the_jit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precompiled, "sources_digest", lambda paths: "not the build's")
    loaded, state = precompiled._try_load()
    assert loaded is None and not state.precompiled
    assert "built from other kernel sources" in state.reason and "make native" in state.reason
    monkeypatch.setattr(precompiled, "EXTENSION", "kompakt._no_such_native")
    loaded, state = precompiled._try_load()
    assert loaded is None and "has no precompiled kernels" in state.reason
    assert not precompiled.check().precompiled


@pytest.mark.parametrize(
    ("mode", "expect"),
    [
        ("jit", "CPUDispatcher"),
        ("aot", "builtin_function_or_method"),
        ("auto", "builtin_function_or_method"),
        ("bogus", "KOMPAKT_KERNELS='bogus': expected one of auto, jit, aot"),
    ],
)
def test_kompakt_kernels_chooses_the_implementation(mode: str, expect: str) -> None:
    script = (
        "from kompakt.records import scan\n"
        "from kompakt.cleaner.kernels import offset_table\n"
        "print(type(scan._scan_batches).__name__, type(offset_table.map_spans).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "KOMPAKT_KERNELS": mode},
        timeout=120,
    )
    assert expect in (done.stdout + done.stderr)
