"""The manual clock: duration syntax, real monotonic time, and ``kompakt serve --clock manual``."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from kompakt.cli.serve import UsageError, build_clock, build_settings
from kompakt.clock import SystemClock
from kompakt.server.manual_clock import ManualClock, parse_duration_ms

READY = re.compile(r"^kompakt ready: listening on [^:]+:\d+, .*, admin (?P<admin>http://\S+), clock manual$")


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1500", 1500),
        ("90s", 90_000),
        ("25h", 90_000_000),
        ("1h30m", 5_400_000),
        ("2d", 172_800_000),
        ("10ms", 10),
        ("5min", 300_000),
        ("1w", 604_800_000),
        (" 3 s ", 3000),
    ],
)
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "-5s", "5 parsecs", "h", "1.5h", "s5"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration_ms(text)


def test_manual_clock_keeps_real_monotonic_time() -> None:
    clock = ManualClock()
    assert abs(clock.now_ms() - SystemClock().now_ms()) < 60_000
    start_wall, start_mono = clock.now_ms(), clock.monotonic_ms()
    clock.advance(3_600_000)
    assert clock.now_ms() == start_wall + 3_600_000
    assert clock.monotonic_ms() - start_mono < 60_000  # timeouts do not jump with the wall clock
    assert isinstance(build_clock("manual"), ManualClock)
    assert isinstance(build_clock("system"), SystemClock)
    with pytest.raises(UsageError):
        build_clock("sundial")


def test_admin_port_defaults(tmp_path: Path) -> None:
    assert build_settings(tmp_path, None, 0, None, []).admin_port == 0
    assert build_settings(tmp_path, None, 19092, None, []).admin_port == 9192
    token = ["admin.auth.token=s3cret-token"]
    assert build_settings(tmp_path, None, 0, None, token, "0.0.0.0", 8000).admin_host == "0.0.0.0"
    assert build_settings(tmp_path, None, 0, None, [], None, -1).admin_port is None
    with pytest.raises(UsageError):
        build_settings(tmp_path, None, 0, None, [], None, 70000)


def test_serve_with_a_manual_clock_moves_time_over_http(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kompakt.cli.main",
            "serve",
            "--data-dir",
            str(tmp_path / "d"),
            "--port",
            "0",
            "--clock",
            "manual",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 60
        line = ""
        while not line:
            remaining = deadline - time.monotonic()
            assert remaining > 0 and process.poll() is None, "the broker did not start"
            poller = select.poll()  # not select(): no FD_SETSIZE limit in a long session
            poller.register(process.stdout, select.POLLIN | select.POLLHUP)
            if poller.poll(remaining * 1000):
                line = process.stdout.readline().strip()
        match = READY.match(line)
        assert match, line
        admin = match["admin"]
        with urllib.request.urlopen(f"{admin}/v1/clock", timeout=30) as response:
            start = json.loads(response.read())["now_ms"]
        request = urllib.request.Request(
            f"{admin}/v1/clock/advance?by=25h",
            method="POST",
            data=b"{}",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert json.loads(response.read())["now_ms"] == start + 25 * 3_600_000
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        if process.stdout is not None:
            process.stdout.close()
