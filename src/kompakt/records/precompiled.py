"""The native kernels compiled ahead of time into the wheel, and the choice between them and numba's JIT.

numba compiles an ``@njit`` kernel on its first call, which after a fresh ``pip install`` costs
seconds (8 s for the cleaner's kernels on the idle 2-core development machine) and lands on the
first compaction, the first produce validation or the first table query. The wheel build
(``hatch_build.py``, running :mod:`kompakt.aot_build`) therefore compiles every Python-facing
kernel with numba's ahead-of-time compiler into one extension module, ``kompakt._native``, for
the generic CPU of the architecture (runs on any x86-64, not only the build machine's model).
Beside it, ``_native.json`` records a digest of the kernel sources it was built from.

Each entry point is declared where the kernel is written::

    @entry_point("i8(u8[:,::1], i8, u8, u8)")
    @njit(cache=True, nogil=True)
    def lookup(table, cap, hi, lo): ...

and :func:`entry_point` returns the precompiled function when ``kompakt._native`` is there and
was built from these very sources, or the numba dispatcher otherwise (an editable install, a
platform the build could not compile for, a source tree edited since ``make native``). Both are
the same source compiled by the same compiler, so they give the same results; the test suite
checks that entry point by entry point. A precompiled function cannot be called from another
``@njit`` function (it is a CPython builtin), so only functions that Python calls are entry
points; their helpers are compiled into the module with them.

``KOMPAKT_KERNELS`` chooses: ``auto`` (the default: precompiled when usable), ``jit`` (always
numba's JIT, which tunes for the host CPU) or ``aot`` (precompiled or an error, for tests that
must exercise what the wheel ships). This module imports neither numba nor the extension until
the first kernel module asks; the kernel modules take ``njit`` from :mod:`kompakt.records.lazy_numba`,
which does not import numba either while the precompiled kernels serve.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

MODE_ENV = "KOMPAKT_KERNELS"
MODES = ("auto", "jit", "aot")
EXTENSION = "kompakt._native"
MANIFEST = "_native.json"
PACKAGE = Path(__file__).resolve().parent.parent
"""The ``kompakt`` package directory; kernel sources are named relative to it."""


@dataclass(frozen=True)
class EntryPoint:
    """One kernel Python calls: the symbol it has in ``kompakt._native``, its numba signature,
    and the JIT dispatcher (whose ``py_func`` the ahead-of-time build compiles)."""

    symbol: str
    signature: str
    dispatcher: Any


@dataclass(frozen=True)
class Status:
    """Which kernels this process runs, and why: for ``kompakt warmup``, explain and the logs."""

    precompiled: bool
    reason: str


ENTRY_POINTS: dict[str, EntryPoint] = {}
"""Every declared entry point, by symbol, in declaration order (what the build exports)."""

_loaded: tuple[ModuleType | None, Status] | None = None


class PrecompiledKernelsError(RuntimeError):
    """``KOMPAKT_KERNELS=aot`` and the precompiled kernels cannot be used."""


def kernel_sources() -> list[Path]:
    """The source files the kernels are compiled from: the record-format package (the scans and
    their constants), the cleaner's kernels package and the table kernels. A change to any of them
    makes a built ``kompakt._native`` stale."""
    found = sorted((PACKAGE / "records").glob("*.py")) + sorted(
        (PACKAGE / "cleaner" / "kernels").glob("*.py")
    )
    found.append(PACKAGE / "table" / "kernels.py")
    # Neither module holds kernel code: this one chooses, lazy_numba hands out numba's decorators.
    return [p for p in found if p.name not in ("precompiled.py", "lazy_numba.py")]


def sources_digest(paths: list[Path]) -> str:
    """SHA-256 over each source's package-relative name and bytes."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def mode() -> str:
    """``KOMPAKT_KERNELS``, checked."""
    value = os.environ.get(MODE_ENV, "auto").strip().lower() or "auto"
    if value not in MODES:
        raise PrecompiledKernelsError(f"{MODE_ENV}={value!r}: expected one of {', '.join(MODES)}")
    return value


def check() -> Status:
    """Whether the precompiled kernels can be used, without loading them (no numpy import: the
    broker asks this at start-up). Finds the extension's file and compares its manifest's digest
    with the kernel sources on disk."""
    if mode() == "jit":
        return Status(False, f"{MODE_ENV}=jit: numba compiles the kernels for this CPU on first use")
    try:
        spec = importlib.util.find_spec(EXTENSION)
    except (ImportError, ValueError) as exc:
        return Status(False, f"this install has no precompiled kernels ({exc})")
    if spec is None or not spec.origin:
        return Status(False, f"this install has no precompiled kernels (no {EXTENSION})")
    manifest_path = Path(spec.origin).with_name(MANIFEST)
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        sources = [PACKAGE / name for name in manifest["sources"]]
        stale = sources_digest(sources) != manifest["digest"] or set(sources) != set(kernel_sources())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Status(False, f"{manifest_path.name} beside {EXTENSION} is unreadable ({exc})")
    if stale:
        return Status(False, f"{EXTENSION} was built from other kernel sources (rebuild it: make native)")
    built = manifest.get("numba", "?")
    return Status(True, f"precompiled ahead of time (numba {built}, {manifest.get('cpu', 'generic')} CPU)")


def _try_load() -> tuple[ModuleType | None, Status]:
    state = check()
    if not state.precompiled:
        return None, state
    try:
        return importlib.import_module(EXTENSION), state
    except ImportError as exc:
        return None, Status(False, f"{EXTENSION} does not load ({exc})")


def _load() -> tuple[ModuleType | None, Status]:
    global _loaded
    if _loaded is None:
        _loaded = _try_load()
        if mode() == "aot" and _loaded[0] is None:
            raise PrecompiledKernelsError(f"{MODE_ENV}=aot but {_loaded[1].reason}")
    return _loaded


def extension() -> ModuleType | None:
    """``kompakt._native`` when this process runs the precompiled kernels, else None (loads it if
    need be; imports numpy, never numba)."""
    return _load()[0]


def status() -> Status:
    """Whether the kernels run precompiled in this process (loads the extension if need be)."""
    return _load()[1]


def entry_point(signature: str) -> Callable[[F], F]:
    """Declare a numba dispatcher as a kernel Python calls, compiled ahead of time with
    ``signature`` (numba's signature syntax; arrays C-contiguous, as the ``ptr`` loads need).

    Returns the precompiled function when it can be used, else the dispatcher itself.
    """

    def declare(dispatcher: F) -> F:
        module_name = dispatcher.__module__.removeprefix("kompakt.")
        symbol = f"{module_name.replace('.', '_')}__{dispatcher.__name__.lstrip('_')}"
        if symbol in ENTRY_POINTS and ENTRY_POINTS[symbol].dispatcher is not dispatcher:
            raise RuntimeError(f"two kernel entry points named {symbol}")
        ENTRY_POINTS[symbol] = EntryPoint(symbol, signature, dispatcher)
        module, _ = _load()
        found = None if module is None else getattr(module, symbol, None)
        return dispatcher if found is None else found

    return declare
