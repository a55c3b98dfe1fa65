"""Compile every kernel entry point ahead of time into ``kompakt._native`` (build time only).

The wheel build runs this (``hatch_build.py``), so an installed kompakt never compiles its
kernels on first use; ``make native`` runs it into the source tree for development. See
:mod:`kompakt.records.precompiled` for how the result is picked up and when it is not.

numba's ahead-of-time compiler (``numba.pycc``) compiles the same kernel source as the JIT, for
the generic CPU of the architecture so the wheel runs on any machine of it. Its wrappers would
hold the GIL for the whole call, while the JIT kernels are ``nogil=True`` so the broker's event
loop runs during a clean; the build therefore compiles with numba's ``release_gil`` flag set
(``_ReleaseGilFlags``), and a test checks that a precompiled kernel lets other threads run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kompakt.records.precompiled import EntryPoint

KERNEL_MODULES = (
    "kompakt.records.scan",
    "kompakt.records.rebuild",
    "kompakt.cleaner.kernels.hashing",
    "kompakt.cleaner.kernels.offset_table",
    "kompakt.cleaner.kernels.rewrite",
    "kompakt.table.kernels",
)


def _entry_points() -> dict[str, EntryPoint]:
    """Import every kernel module with the JIT selected, so each entry point is its dispatcher."""
    os.environ["KOMPAKT_KERNELS"] = "jit"
    from kompakt.records import precompiled

    for name in KERNEL_MODULES:
        importlib.import_module(name)
    return dict(precompiled.ENTRY_POINTS)


def build(output_dir: Path) -> list[Path]:
    """Compile ``kompakt._native`` and its manifest into ``output_dir``; return the two files."""
    import numba

    from kompakt.records import precompiled

    # numba.pycc is untyped and outside numba's stable API; it is used here only.
    pycc: Any = importlib.import_module("numba.pycc")
    pycc_compiler: Any = importlib.import_module("numba.pycc.compiler")
    original_flags = pycc_compiler.Flags

    def release_gil_flags() -> Any:
        flags = original_flags()
        flags.release_gil = True
        return flags

    entry_points = _entry_points()
    output_dir.mkdir(parents=True, exist_ok=True)
    cc = pycc.CC(precompiled.EXTENSION.rpartition(".")[2])
    cc.output_dir = str(output_dir)
    cc.verbose = False
    for symbol, entry in entry_points.items():
        cc.export(symbol, entry.signature)(entry.dispatcher.py_func)
    pycc_compiler.Flags = release_gil_flags
    try:
        cc.compile()
    finally:
        pycc_compiler.Flags = original_flags
    extension = next(p for p in output_dir.glob(f"{cc.name}.*") if p.suffix in (".so", ".pyd"))
    sources = precompiled.kernel_sources()
    manifest = output_dir / precompiled.MANIFEST
    manifest.write_text(
        json.dumps(
            {
                "digest": precompiled.sources_digest(sources),
                "sources": [p.relative_to(precompiled.PACKAGE).as_posix() for p in sources],
                "numba": numba.__version__,
                "cpu": cc.target_cpu or "generic",
                "exports": sorted(entry_points),
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    return [extension, manifest]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--inplace", action="store_true", help="Write into the kompakt package directory.")
    where.add_argument("--output", type=Path, help="Write into this directory.")
    parser.add_argument("--if-stale", action="store_true", help="With --inplace: only when missing or stale.")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.inplace and args.if_stale:
        from kompakt.records import precompiled

        state = precompiled.status()
        if state.precompiled:
            print(f"native kernels up to date: {state.reason}")  # noqa: T201
            return 0
    if args.inplace:
        from kompakt.records.precompiled import PACKAGE

        output = PACKAGE
    else:
        output = args.output or Path(tempfile.mkdtemp(prefix="kompakt-native-"))
    files = build(output)
    took = time.monotonic() - started
    print(f"compiled {len(_entry_points())} kernels ahead of time in {took:.1f} s: {files[0]}")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
