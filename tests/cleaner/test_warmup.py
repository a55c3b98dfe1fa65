"""The first run after an install: the kernel cache check, the background compile the cleaner
waits for, and the notice the offline tools print (issue 17)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from kompakt.cleaner.log_cleaner import LogCleaner
from kompakt.cleaner.warmup import BackgroundWarmup, kernels_cached, write_stamp
from kompakt.clock import FakeClock
from kompakt.config.broker import BrokerConfig


def test_the_cache_check_wants_a_warmup_newer_than_each_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    source = tmp_path / "kernels_x.py"
    source.write_text("@njit(cache=True)\ndef f(): ...\n")
    assert not kernels_cached([source])
    stamp = write_stamp([source])
    assert stamp == tmp_path / "__pycache__" / "kompakt-warmup.stamp"  # beside numba's in-tree cache
    assert kernels_cached([source])
    later = time.time() + 10
    os.utime(source, (later, later))  # an edited source makes the cache stale
    assert not kernels_cached([source])
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba-cache"))
    assert not kernels_cached([source])  # with NUMBA_CACHE_DIR numba looks only there
    stamp = write_stamp([source])
    assert stamp is not None and stamp.parent.parent == tmp_path / "numba-cache"
    os.utime(stamp, (later + 1, later + 1))
    assert kernels_cached([source])


def test_the_installed_kernels_are_cached_in_the_test_run() -> None:
    # make test runs `python -m kompakt.cleaner.warmup` before the suite.
    assert kernels_cached()


def test_a_warm_cache_starts_no_process() -> None:
    warmup = BackgroundWarmup(cached=lambda: True)
    warmup.start()
    assert warmup.wait(10)
    assert not warmup.started_process


def test_the_cleaner_waits_for_the_background_compile(tmp_path: Path) -> None:
    """A cold cache: the compile runs in a child process; the cleaner's first use of the kernels
    (building its cleaner) waits for it instead of compiling a second time in the broker."""
    gate = tmp_path / "go"
    script = f"import pathlib, time\nwhile not pathlib.Path({str(gate)!r}).exists(): time.sleep(0.01)\n"
    warmup = BackgroundWarmup(command=[sys.executable, "-c", script], cached=lambda: False)
    cleaner = LogCleaner(
        BrokerConfig(),
        dict,
        tmp_path,
        FakeClock(),
        kernels_ready=warmup.wait,
        kernels_pending=lambda: warmup.running,
    )
    assert not cleaner.kernels_compiling
    warmup.start()
    built: list[object] = []
    worker = threading.Thread(target=lambda: built.append(cleaner.new_cleaner(0)))
    worker.start()
    deadline = time.monotonic() + 10
    while not warmup.started_process:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    worker.join(0.3)
    assert worker.is_alive() and not built  # still waiting for the compile
    assert cleaner.kernels_compiling  # what `kompakt admin compact` tells the user
    gate.write_text("")
    worker.join(20)
    assert built and not warmup.running and not cleaner.kernels_compiling


def test_stopping_the_broker_stops_an_unfinished_compile(tmp_path: Path) -> None:
    warmup = BackgroundWarmup(
        command=[sys.executable, "-c", "import time; time.sleep(60)"], cached=lambda: False
    )
    warmup.start()
    deadline = time.monotonic() + 10
    while not warmup.started_process:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    warmup.stop()
    assert warmup.wait(10)
