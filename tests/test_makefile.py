"""``make run PORT=... ADMIN_PORT=...`` (issue 17): the ports reach ``kompakt serve``; and
``make run`` installs the runtime only (issue 28)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

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


#: Packages of the test extra (and the Makefile's test step) that starting a broker never needs.
TEST_ONLY = (
    "pytest",
    "pytest-xdist",
    "hypothesis",
    "moto",
    "mypy",
    "ruff",
    "import-linter",
    "duckdb",
    "quixstreams",
    "kafka-python",
    "aiokafka",
    "mkdocs",
    "mkdocs-material",
)


def _clean_clone(destination: Path) -> None:
    """The tracked files as they are in this checkout (committed or not), without .venv or any
    build output: what `git clone` of this tree would give."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no clean clone to make")
    listed = subprocess.run([git, "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True)
    for name in listed.stdout.decode().split("\0"):
        source = ROOT / name
        if name and source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def test_make_run_installs_only_the_runtime_from_a_clean_clone(tmp_path: Path) -> None:
    """Issue 28: `make run`'s install step (`make install`) gives a venv that serves, without
    the test suite's packages. It reuses pip's cache, so it is quick after the first time."""
    make, python = shutil.which("make"), shutil.which("python3")
    assert make is not None and python is not None
    clone = tmp_path / "clone"
    _clean_clone(clone)
    done = subprocess.run(
        [make, "-C", str(clone), "install", f"PYTHON={python}"], capture_output=True, text=True, timeout=280
    )
    assert done.returncode == 0, done.stderr[-3000:]
    listed = subprocess.run(
        [str(clone / ".venv/bin/python"), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    installed = {entry["name"].lower().replace("_", "-") for entry in json.loads(listed.stdout)}
    assert {"kompakt", "numba", "confluent-kafka", "pyarrow"} <= installed
    assert sorted(installed & set(TEST_ONLY)) == []
    served = subprocess.run(
        [str(clone / ".venv/bin/kompakt"), "serve", "--help"], capture_output=True, text=True, timeout=120
    )
    assert served.returncode == 0 and "--data-dir" in served.stdout, served.stderr
