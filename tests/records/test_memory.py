"""Large buffers with a chosen page size (kompakt.records.memory): what the cleaner's buffers,
scratch arrays and offset map are allocated with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kompakt.records.memory import HUGE_PAGE, empty, zeros_u8
from kompakt.records.native import Workspace

SMAPS = Path("/proc/self/smaps")


def vm_flags(address: int) -> set[str]:
    """The VmFlags of the mapping holding ``address`` in this process."""
    inside = False
    for line in SMAPS.read_text().splitlines():
        head = line.split(" ", 1)[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= address < hi
        elif inside and line.startswith("VmFlags:"):
            return set(line.split()[1:])
    raise AssertionError(f"no mapping holds {address:#x}")


@pytest.mark.parametrize("huge", [False, True])
def test_zeros_are_zero_writable_and_sized(huge: bool) -> None:
    buf = zeros_u8(5 * HUGE_PAGE + 123, huge=huge)
    assert buf.shape == (5 * HUGE_PAGE + 123,) and buf.dtype == np.uint8
    assert not buf.any()
    buf[:] = 7
    assert int(buf.sum()) == 7 * len(buf)
    if huge:
        assert buf.ctypes.data % HUGE_PAGE == 0


def test_empty_takes_shape_and_dtype_either_way() -> None:
    for huge in (False, True):
        for shape in (10, (3, 1 << 20), 1 << 22):
            arr = empty(shape, np.int64, huge=huge)
            assert arr.shape == ((shape,) if isinstance(shape, int) else shape)
            assert arr.dtype == np.int64 and arr.flags.c_contiguous and arr.flags.writeable


@pytest.mark.skipif(not SMAPS.exists(), reason="needs /proc/self/smaps")
def test_base_pages_are_advised_against_huge_pages_and_huge_ones_for_them() -> None:
    small = empty((4, 1 << 20), np.int64, huge=False)
    assert "nh" in vm_flags(small.ctypes.data)
    big = zeros_u8(4 * HUGE_PAGE, huge=True)
    assert "hg" in vm_flags(big.ctypes.data)


def test_a_workspace_keeps_its_page_choice_as_it_grows() -> None:
    ws = Workspace(huge_pages=False)
    first = ws.take("a", 2, 1 << 20, np.int64)
    assert ws.take("a", 2, 1000, np.int64) is first  # reused while large enough
    grown = ws.take("a", 2, 2 << 20, np.int64)
    assert grown.shape[1] >= 2 << 20 and grown is not first
    if SMAPS.exists():
        assert "nh" in vm_flags(grown.ctypes.data)
