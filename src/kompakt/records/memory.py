"""Large buffers and the page size they are faulted in with.

A long-lived cleaner thread touches its buffers once and then reuses them for every clean: there
2 MiB pages pay (warm cleans of the anchor log, 100 k keys, alternating in one process at load
7: 0.43 s with the read buffers and scratch arrays in 2 MiB pages, 0.55 s in 4 KiB pages). A
process that cleans once (``kompakt log compact``) touches all of them for the first time, and
there 2 MiB pages cost more than they save on a VM that hands free guest memory back to its
host. The development VM reports free blocks of 8 MiB and more to the host
(``page_reporting.page_reporting_order=11`` on its kernel command line); a 2 MiB page is mostly
carved from such a block, and its first touch waits for the host to fault the memory back in.
Populating 256 MiB of 2 MiB pages took 0.03 s right after another process had freed as much and
0.8-4.2 s otherwise (64 MiB: 8 ms to 1.3 s), against 20-35 ms for 64 MiB of 4 KiB pages every
time, which come from smaller blocks the guest keeps. The first clean of a fresh process spent
1.2-1.7 s of system time with its buffers in 2 MiB pages and 0.44-0.56 s in 4 KiB pages (a
warm clean: 0.37-0.50 s). numpy advises 2 MiB pages for every array of 4 MiB or more;
:func:`empty` and :func:`zeros_u8` let the caller choose.

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
    arr: npt.NDArray[Any] = zeros_u8(count * itemsize, huge=False).view(dtype).reshape(dims)
    return arr


def keep_freed_memory() -> bool:
    """Keep the memory this process frees for its next allocations instead of handing it back to
    the kernel (glibc's ``M_MMAP_THRESHOLD`` at its 32 MiB maximum, ``M_TRIM_THRESHOLD`` 1 GiB).

    For a process that compacts once: a copy pass allocates and frees each chunk's output (up to
    the chunk's size), and with glibc's defaults the first ones are mapped and unmapped, and freed
    heap tops are trimmed, so the pages come back as fresh ones, each first touch a fault (and on
    this VM often a host fault: see above). ``kompakt log compact`` at 2 M keys, alternating with
    and without (the same settings as ``GLIBC_TUNABLES``), load 3-4: 1.49-1.71 s against
    2.71-3.48 s, 151-157 k page faults against 212-220 k, 0.74-1.04 s of system time against
    2.05-2.87 s; at 100 k keys no difference (0.75-0.85 s either way). False where the C library
    is not glibc (nothing changes there)."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    return bool(mallopt(m_mmap_threshold, 32 * 1024 * 1024)) and bool(mallopt(m_trim_threshold, 1 << 30))
