"""Fixtures of the log map's browser tests: an in-process broker and the headless-chromium driver.

The browser tests run ``tests/e2e/web/js/map_check.js`` (playwright-core driving Debian's chromium).
When chromium, Node.js or playwright-core is missing they FAIL with the command that installs it
(``make test`` runs those commands first): a log map that is never looked at is not tested.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kompakt.testing import InProcessBroker

ROOT = Path(__file__).resolve().parents[3]
JS_DIR = Path(__file__).resolve().parent / "js"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("KOMPAKT_CHROMIUM", "/usr/bin/chromium")
DRIVER_TIMEOUT_S = 90


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    """A manual-clock broker whose cleaner threads are off, so only explicit compactions clean."""
    with InProcessBroker(tmp_path / "data", overrides={"log.cleaner.enable": "false"}) as b:
        yield b


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, with the fix; None when they can."""
    if not Path(CHROMIUM).exists():
        return (
            f"chromium is not installed at {CHROMIUM}: the log map tests drive it headless. "
            "Install it with `apt-get update && apt-get install -y chromium` (`make system-deps` does)."
        )
    if shutil.which("node") is None:
        return "Node.js is not installed: the log map tests run playwright-core under node."
    if not (JS_DIR / "node_modules" / "playwright-core").is_dir():
        return (
            f"playwright-core is not installed in {JS_DIR}: run `cd tests/e2e/web/js && npm install` "
            "(`make js-deps` does)."
        )
    return None


def run_map_check(config: dict[str, Any]) -> dict[str, Any]:
    """Run the browser driver with ``config``; its findings, or a test failure with its output."""
    missing = browser_missing()
    if missing is not None:
        pytest.fail(missing, pytrace=False)
    proc = subprocess.run(
        ["node", str(JS_DIR / "map_check.js"), json.dumps({"chromium": CHROMIUM, **config})],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT_S,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    findings: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    if proc.returncode != 0:
        pytest.fail(f"the browser check failed:\n{proc.stderr}\nfindings: {json.dumps(findings, indent=1)}")
    return findings
