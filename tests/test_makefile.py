"""``make run PORT=... ADMIN_PORT=...`` (issue 17): the ports reach ``kompakt serve``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _dry_run(*args: str) -> str:
    make = shutil.which("make")
    assert make is not None, "make is needed (it is how the README starts kompakt)"
    done = subprocess.run([make, "-n", "-C", str(ROOT), *args], capture_output=True, text=True, check=True)
    return done.stdout


def test_make_run_takes_port_and_admin_port() -> None:
    serve = [
        line for line in _dry_run("run", "PORT=19500", "ADMIN_PORT=19501").splitlines() if " serve " in line
    ]
    assert serve and serve[-1].endswith("--port 19500 --admin-port 19501")


def test_make_run_defaults_to_kafkas_port() -> None:
    serve = [line for line in _dry_run("run").splitlines() if " serve " in line]
    assert serve[-1].endswith("--data-dir ./kompakt-data --port 9092 --admin-port 9192")
