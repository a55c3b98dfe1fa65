"""CRC-32C from the crc32c package's extension module, loaded without the package's ``__init__``.

Every v2 batch carries a CRC-32C, computed by the crc32c package's C extension (hardware
accelerated where the CPU has it). The package's ``__init__`` sets ``__version__`` with
``importlib.metadata.version()``, which imports importlib.metadata, email, zipfile and csv: 36-40
ms of a fresh process on the 2-core development machine, ten times the extension itself, and on
the path of every ``kompakt log compact`` (issue 33: the command within 10 % of an in-process
clean). kompakt uses only the extension (``crc32c``, ``hardware_based`` and its file, for the raw
function a native kernel calls), so this module loads ``crc32c._crc32c`` from the installed
package's directory by itself and registers it under its own name: a later ``import crc32c``
(the backup code, a test) finds it there and reuses it. When the package is imported already, or
its layout is not the expected one, the package's own import is used.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

EXTENSION = "crc32c._crc32c"


def _load_extension() -> ModuleType:
    loaded = sys.modules.get(EXTENSION)
    if loaded is not None:
        return loaded
    try:
        package = importlib.util.find_spec("crc32c")  # finds the package without running it
        locations = list(package.submodule_search_locations or []) if package is not None else []
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(locations[0]) / f"_crc32c{suffix}" if locations else None
            if path is None or not path.is_file():
                continue
            spec = importlib.util.spec_from_file_location(EXTENSION, path)
            if spec is None or spec.loader is None:
                break
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules[EXTENSION] = module
            return module
    except (ImportError, OSError, ValueError):
        pass
    return importlib.import_module(EXTENSION)


extension = _load_extension()
"""The crc32c package's C extension module (``__file__`` names its shared library)."""

if TYPE_CHECKING:
    from crc32c import crc32c as crc32c
    from crc32c import hardware_based as hardware_based
else:
    crc32c = extension.crc32c
    hardware_based = extension.hardware_based
