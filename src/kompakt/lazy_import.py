"""Deferred imports for modules on ``kompakt serve``'s start path.

numpy takes a quarter of the broker's start (about 60 ms here) and no request needs it before
the first Produce, Fetch or cleaner pass. A module on the start path binds ``np`` to a
:class:`LazyModule` instead; the first attribute read imports numpy and rebinds the module's
global to it, so every later use is an ordinary global lookup. Python's import lock makes two
threads racing for the first read safe: both get the same module.

Used as::

    if TYPE_CHECKING:
        import numpy as np
    else:
        np = LazyModule("numpy", globals(), "np")
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands in for a module in one namespace until an attribute of it is first read."""

    __slots__ = ("_name", "_namespace", "_alias")

    def __init__(self, name: str, namespace: dict[str, Any], alias: str) -> None:
        self._name = name
        self._namespace = namespace
        self._alias = alias

    def load(self) -> ModuleType:
        module = importlib.import_module(self._name)
        self._namespace[self._alias] = module
        return module

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.load(), attribute)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"
