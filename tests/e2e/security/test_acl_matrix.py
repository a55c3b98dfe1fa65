"""The ACL matrix: the confluent-kafka scenario of ``tools/acl_matrix.py`` against ``kompakt
serve`` over SASL PLAIN gives, step for step, the codes Apache Kafka 4.1.2 with StandardAuthorizer
gave (recorded in ``fixtures/acl_matrix_kafka_4.1.2.json`` by the same script)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.serve import launch

pytestmark = pytest.mark.clients

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tools" / "acl_matrix.py"
RECORDED = Path(__file__).with_name("fixtures") / "acl_matrix_kafka_4.1.2.json"
#: The scenario waits 8 s in the consumer step that ends TIMED_OUT on both brokers, and up to
#: 20-30 s in each other step on a loaded machine.
DEADLINE_S = 600


def _properties(tmp_path: Path) -> Path:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import acl_matrix  # the script's own server.properties lines
    finally:
        sys.path.remove(str(SCRIPT.parent))
    path = tmp_path / "server.properties"
    lines = [*acl_matrix.server_properties(0), "listeners=SASL_PLAINTEXT://127.0.0.1:0"]
    path.write_text("\n".join([*lines, "group.initial.rebalance.delay.ms=0"]) + "\n")
    return path


def test_acl_matrix_matches_apache_kafka(tmp_path: Path) -> None:
    # No admin endpoint: with a SASL listener it would want a bearer token (not what is tested here).
    broker = launch(tmp_path / "data", "--config", str(_properties(tmp_path)), "--admin-port", "-1")
    try:
        out = tmp_path / "kompakt.json"
        completed = subprocess.run(
            [sys.executable, str(SCRIPT), "--bootstrap", f"127.0.0.1:{broker.port}", "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=DEADLINE_S,
        )
        assert completed.returncode == 0, completed.stderr[-4000:]
        assert json.loads(out.read_text()) == json.loads(RECORDED.read_text())
    finally:
        assert broker.stop() == 0
