from __future__ import annotations

from pathlib import Path

from .log_helpers import LogHarness, config, kv, read_offsets


def test_append_read_reopen(tmp_path: Path) -> None:
    h = LogHarness(tmp_path / "t-0", config(internal_segment_bytes=300, index_interval_bytes=1))
    for i in range(20):
        info = h.log.append(kv(i))
        assert info.first_offset == i
    assert len(h.log.segments) > 2
    for i in range(20):
        data = h.log.read(i, 1).records
        assert read_offsets(data)[0] == i
    h.reopen()
    assert h.log.log_end_offset == 20
    assert read_offsets(h.log.read(0, 10_000).records)[:3] == [0, 1, 2]
    h.reopen(clean=False)
    assert h.log.log_end_offset == 20
