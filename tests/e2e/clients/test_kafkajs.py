"""kafkajs (Node.js) produces and consumes through kompakt: null and empty values stay distinct."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.serve import BrokerProcess

pytestmark = pytest.mark.clients
JS_DIR = Path(__file__).resolve().parents[1] / "js"


def test_kafkajs_round_trip(kompakt_broker: BrokerProcess) -> None:
    assert shutil.which("node") is not None, "Node.js is needed for the kafkajs test"
    assert (JS_DIR / "node_modules" / "kafkajs").is_dir(), "run `make test` (it installs kafkajs from npm)"
    result = subprocess.run(
        ["node", str(JS_DIR / "roundtrip.js"), kompakt_broker.bootstrap, "kafkajs-topic"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert [(r["key"], r["value"]) for r in records] == [("a", "1"), ("b", None), ("c", ""), ("a", "2")]
    assert [r["offset"] for r in records] == [0, 1, 2, 3]
