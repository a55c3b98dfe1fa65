"""The README's walk-through, run as a shell script against a real ``kompakt serve`` (issue 17).

Hosts, the data directory and the admin address are the test's; ``source .venv/bin/activate``
becomes this interpreter's ``bin`` on ``PATH``; ``backup.yaml``/``restore.yaml`` are OSO's example
files with the test's hosts and paths. Every other character of the block is the README's, so
the README cannot drift from what the commands do.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.serve import BrokerProcess, start_broker

pytestmark = pytest.mark.clients

ROOT = Path(__file__).resolve().parents[3]
OSO = Path(__file__).parent / "oso"


def walkthrough() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Walk-through") :]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match, "the walk-through has a sh block"
    return match.group(1)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path / "kompakt-data")
    yield process
    assert process.stop() == 0, process.stderr_path.read_text()


def test_the_readme_walkthrough_runs(served: BrokerProcess, tmp_path: Path) -> None:
    admin = re.search(r"admin (http://\S+)", served.ready_line)
    assert admin
    for name, out in (("example-backup.yaml", "backup.yaml"), ("example-restore.yaml", "restore.yaml")):
        text = (OSO / name).read_text().replace("localhost:9092", served.bootstrap)
        text = text.replace("/var/lib/kafka-backup/data", str(tmp_path / "backups"))
        text = text.replace("- orders\n      - payments\n", "- user-profiles\n")  # the walk-through's topic
        (tmp_path / out).write_text(text)
    script = walkthrough().replace("source .venv/bin/activate", "set -euo pipefail")
    script = script.replace("localhost:9092", served.bootstrap).replace(
        "./kompakt-data", str(served.data_dir)
    )
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "KOMPAKT_ADMIN_URL": admin.group(1),
        "KOMPAKT_BOOTSTRAP": served.bootstrap,
    }
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "Created topic user-profiles." in out
    assert "user_id_99:Jane\nuser_id_98:Bob\nuser_id_99:Jane Doe\nuser_id_99:null\n" in out
    assert "ok: the restore can run" in out
    # After the compaction Jane's values are gone; Kafka's key separator is a tab by default.
    assert "user_id_98\tBob\nuser_id_99\tnull\n" in out, out
    assert (tmp_path / "map.html").stat().st_size > 10_000
