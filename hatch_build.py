"""Wheel build hook: compile the native kernels ahead of time into the wheel (``kompakt._native``).

An installed kompakt then never compiles on first use (see ``src/kompakt/records/precompiled.py``).
Editable installs skip it (``make native`` builds into the source tree instead). When the
compile fails (no C compiler, an architecture numba cannot target), the wheel is built without
it and the kernels fall back to numba's JIT, unless ``KOMPAKT_NATIVE=require`` makes that an
error; ``KOMPAKT_NATIVE=0`` skips the compile.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class NativeKernelsHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        setting = os.environ.get("KOMPAKT_NATIVE", "1").strip().lower()
        if self.target_name != "wheel" or version == "editable" or setting in ("0", "no", "false"):
            return
        sys.path.insert(0, str(Path(self.root) / "src"))
        output = Path(tempfile.mkdtemp(prefix="kompakt-native-"))
        try:
            from kompakt.aot_build import build

            files = build(output)
        except Exception as exc:  # noqa: BLE001 - any failure falls back to the JIT, said loudly
            if setting == "require":
                raise
            self.app.display_warning(
                f"kompakt: precompiling the native kernels failed ({exc!r}); the wheel falls back to "
                "numba's JIT, which compiles them on first use"
            )
            return
        finally:
            sys.path.remove(str(Path(self.root) / "src"))
        for path in files:
            build_data["force_include"][str(path)] = f"kompakt/{path.name}"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
