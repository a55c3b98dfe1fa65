"""Large buffers and the page size they are faulted in with.

A long-lived cleaner thread touches its buffers once and then reuses them for every clean: there
2 MiB pages pay, because the kernels probe and stream through them with fewer TLB misses (a warm
clean of the anchor log ran 0.43 s with its read buffers and scratch arrays in 2 MiB pages against
0.55 s in 4 KiB pages). A process that cleans once (``kompakt log compact``) touches all of its
buffers for the first time, and there they cost more than they save on a VM that returns free
guest memory to its host: the development VM reports free blocks of 8 MiB and more to the host
(``page_reporting.page_reporting_order=11``), a 2 MiB page is carved from such a block, and its
first touch waits for the host to fault the memory back in (64 MiB took 8 ms when the guest had
just freed it, 0.2-1.3 s after a pause; 256 MiB 0.8-4.2 s), while 4 KiB pages mostly come from
blocks the guest keeps (64 MiB in 20-35 ms every time). numpy advises 2 MiB pages for every array
of 4 MiB or more; :func:`empty` and :func:`zeros` let the caller choose.

With ``huge=False`` the memory is advised ``MADV_NOHUGEPAGE``, so a system whose THP setting is
``always`` does not give it 2 MiB pages either. Untouched pages of either kind cost nothing.
"""

from __future__ import annotations

import contextlib
import mmap
from typing import Any, Final

import numpy as np
import numpy.typing as npt

HUGE_PAGE: Final = 2 * 1024 * 1024


def zeros_u8(nbytes: int, *, huge: bool) -> npt.NDArray[np.uint8]:
    """``nbytes`` zero bytes in a private anonymous mapping (no memory until first written).

    ``huge``: aligned to and advised for 2 MiB pages; otherwise advised against them."""
    if nbytes <= 0:
        return np.zeros(0, dtype=np.uint8)
    extra = HUGE_PAGE if huge else 0
    region = mmap.mmap(-1, nbytes + extra, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    advice = getattr(mmap, "MADV_HUGEPAGE" if huge else "MADV_NOHUGEPAGE", None)
    if advice is not None:
        with contextlib.suppress(OSError):  # THP disabled or unsupported: plain pages still work
            region.madvise(advice)
    raw = np.frombuffer(region, dtype=np.uint8)
    skip = -raw.ctypes.data % HUGE_PAGE if huge else 0
    return raw[skip : skip + nbytes]


def empty(shape: int | tuple[int, ...], dtype: Any, *, huge: bool) -> npt.NDArray[Any]:
    """``np.empty(shape, dtype)`` with the page size chosen (see the module docstring): numpy's
    own allocation when ``huge`` (it advises 2 MiB pages from 4 MiB up), else base pages."""
    if huge:
        return np.empty(shape, dtype=dtype)
    dims = (shape,) if isinstance(shape, int) else shape
    itemsize = np.dtype(dtype).itemsize
    count = int(np.prod(dims, dtype=np.int64))
    if count * itemsize < HUGE_PAGE:  # malloc's small blocks: never 2 MiB pages, often reused
        return np.empty(shape, dtype=dtype)
    return zeros_u8(count * itemsize, huge=False).view(dtype).reshape(dims)
