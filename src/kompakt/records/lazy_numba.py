"""numba's decorators for the kernel modules, deferred while the precompiled kernels serve.

``import numba`` costs 0.6 s of a fresh process (half of ``kompakt log compact``'s start before this
module), and a process whose kernels come from ``kompakt._native`` never calls numba: its entry
points are the precompiled functions, the helpers they inlined are compiled into them. The
kernel modules still declare every kernel with ``@njit`` (the JIT path and the ahead-of-time build
compile that very source), so they take ``njit``, ``intrinsic`` and the codegen modules
(``types``, ``cgutils``, ``ir``) from here instead of from numba:

* when the precompiled kernels are not used (``KOMPAKT_KERNELS=jit``, no or a stale
  ``kompakt._native``), these are numba's own objects, imported when this module is;
* when they are, ``@njit`` and ``intrinsic`` return a :class:`Deferred` holding the Python
  function and the options, and the codegen modules are placeholders: numba is not imported.

The first time anything deferred is used (a kernel that has no precompiled twin, a test calling
an entry point's JIT dispatcher), :func:`materialize` imports numba, builds every deferred
object exactly as the decorators would have, and rebinds each placeholder it finds in kompakt's
modules to the real object. numba resolves a kernel's calls to other kernels through the
module's globals at compile time, so after the rebinding the JIT compiles the same thing it
compiles in a JIT process. A :class:`Deferred` kept elsewhere (``precompiled.ENTRY_POINTS``)
forwards calls and attributes to its real object.

This module is the only one that imports numba at run time (the ahead-of-time build,
:mod:`kompakt.aot_build`, is the other): the import-linter contract "Only the native kernels
import numba" names it.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar, cast

from kompakt.records import precompiled

F = TypeVar("F", bound=Callable[..., Any])

_lock = threading.RLock()
_pending: list[Deferred] = []
_materialized = False


class Deferred:
    """A numba object (a dispatcher, an intrinsic) not built yet; built by :func:`materialize`."""

    def __init__(self, build: Callable[[], Any], function: Callable[..., Any]) -> None:
        self._build = build
        self._real: Any = None
        functools.update_wrapper(self, function)

    def real(self) -> Any:
        """The numba object this stands for (imports numba the first time)."""
        if self._real is None:
            materialize()
        return self._real

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.real()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # Only reached for what the wrapper lacks: py_func, signatures, compile, stats, ...
        if name.startswith("__") or name in ("_build", "_real"):
            raise AttributeError(name)
        return getattr(self.real(), name)

    def __repr__(self) -> str:
        return f"<deferred numba {getattr(self, '__qualname__', '?')}>"


class _LazyModule:
    """A module of numba's or llvmlite's used inside intrinsics' code generation (only when numba
    compiles, i.e. after :func:`materialize` has rebound the name to the module itself)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def real(self) -> ModuleType:
        materialize()
        return _codegen_modules()[self._name]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_name":
            raise AttributeError(name)
        return getattr(self.real(), name)


def deferring() -> bool:
    """Whether this process runs the precompiled kernels and numba has not been needed yet."""
    return not _materialized and precompiled.extension() is not None


def _defer(build: Callable[[], Any], function: Callable[..., Any]) -> Any:
    with _lock:
        if not deferring():
            return build()
        deferred = Deferred(build, function)
        _pending.append(deferred)
        return deferred


def njit(**options: Any) -> Callable[[F], F]:
    """``numba.njit(**options)``, deferred while the precompiled kernels serve. Typed as keeping
    the function's signature: a dispatcher, its precompiled twin and a :class:`Deferred` are all
    called as the Python function is."""

    def decorate(function: F) -> F:
        def build() -> Any:
            return _numba().njit(**options)(function)

        return cast(F, _defer(build, function))

    return decorate


def intrinsic(typer: Callable[..., Any]) -> Any:
    """``numba.extending.intrinsic``, deferred likewise."""

    def build() -> Any:
        from numba.extending import intrinsic as numba_intrinsic

        return numba_intrinsic(typer)

    return _defer(build, typer)


def _numba() -> Any:
    import numba

    return numba


def materialize() -> None:
    """Import numba, build every deferred object, and rebind the placeholders in kompakt's modules."""
    global _materialized
    with _lock:
        if _materialized:
            return
        _numba()
        for deferred in _pending:
            deferred._real = deferred._build()
        real_modules = {id(lazy): _codegen_modules()[lazy._name] for lazy in _LAZY_MODULES}
        for name, module in list(sys.modules.items()):
            if not name.startswith("kompakt") or module is None:
                continue
            namespace = vars(module)
            for attr, value in list(namespace.items()):
                if isinstance(value, Deferred):
                    namespace[attr] = value._real
                elif isinstance(value, _LazyModule):
                    namespace[attr] = real_modules[id(value)]
        _pending.clear()
        _materialized = True


def _codegen_modules() -> dict[str, ModuleType]:
    from llvmlite import ir as llvm_ir  # type: ignore[import-untyped]
    from numba.core import cgutils as numba_cgutils
    from numba.core import types as numba_types

    return {"types": numba_types, "cgutils": numba_cgutils, "ir": llvm_ir}


_LAZY_MODULES: list[_LazyModule] = []


def _codegen_module(name: str) -> Any:
    if deferring():
        lazy = _LazyModule(name)
        _LAZY_MODULES.append(lazy)
        return lazy
    return _codegen_modules()[name]


types: Any = _codegen_module("types")
cgutils: Any = _codegen_module("cgutils")
ir: Any = _codegen_module("ir")
