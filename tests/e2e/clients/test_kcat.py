"""kcat 1.7 (librdkafka 2.0.2): listing, -Z tombstones, and ``%S`` telling null from empty.

Skipped only when ``kcat`` is not on PATH (the Makefile installs it).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.support.serve import BrokerProcess

pytestmark = pytest.mark.clients

TIMEOUT_S = 30


def kcat(broker: BrokerProcess, *args: str, stdin: str | None = None) -> str:
    assert shutil.which("kcat") is not None, "kcat is missing: `make test` installs it with apt-get"
    result = subprocess.run(
        ["kcat", "-b", broker.bootstrap, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_list_metadata(kompakt_broker: BrokerProcess) -> None:
    out = kcat(kompakt_broker, "-L")
    assert "1 brokers:" in out
    assert f"127.0.0.1:{kompakt_broker.port}" in out
    assert 'topic "compacted" with 1 partitions' in out


def test_tombstones_and_empty_values(kompakt_broker: BrokerProcess) -> None:
    topic = "kcat-data"
    kcat(kompakt_broker, "-P", "-t", topic, "-K", ":", "-Z", stdin="k1:v1\nk2:\n")  # k2 → null value
    kcat(kompakt_broker, "-P", "-t", topic, "-K", ":", stdin="k3:\n")  # k3 → empty value
    out = kcat(kompakt_broker, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%k %S\n")
    assert out.splitlines() == ["k1 2", "k2 -1", "k3 0"]


def test_tombstones_on_compacted_topic(kompakt_broker: BrokerProcess) -> None:
    kcat(kompakt_broker, "-P", "-t", "compacted", "-K", ":", "-Z", stdin="gone:\n")
    out = kcat(kompakt_broker, "-C", "-t", "compacted", "-o", "beginning", "-e", "-f", "%k %S\n")
    assert "gone -1" in out.splitlines()
