"""The README is the front page: short, with a table of contents and the two commands, and its
walk-through runs as printed (issue 28).

The walk-through runs as a shell script against a real ``kompakt serve`` started on a fresh data
directory. Only the hosts, the data directory and the admin address are the test's;
``source .venv/bin/activate`` becomes this interpreter's ``bin`` on ``PATH``, and the example
files are ``examples/``'s with the test's broker address. Every other character of the block is
the README's, so the README cannot drift from what the commands do.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.serve import BrokerProcess, start_broker

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def walkthrough() -> str:
    text = README.read_text()
    section = text[text.index("## Walk-through") :]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match, "the walk-through has a sh block"
    return match.group(1)


def test_the_front_page_is_short_with_contents_and_the_two_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    assert "## Contents" in text
    quickstart = text[text.index("## The two commands") : text.index("## Walk-through")]
    commands = re.search(r"```sh\n(.*?)```", quickstart, re.S)
    assert commands
    shown = [line.split()[:2] for line in commands.group(1).splitlines()]
    assert shown == [["make", "run"], ["make", "test"]]


def test_every_page_the_front_page_names_exists() -> None:
    for target in re.findall(r"\]\(((?:docs|examples)/[^)#]*)\)", README.read_text()):
        assert (ROOT / target).exists(), target
    used = re.findall(r"examples/[\w.]+", walkthrough())
    assert used, "the walk-through uses the example files it ships"
    for name in used:
        assert (ROOT / name).is_file(), name


def compact_stats(out: str) -> dict[str, str]:
    """The row of ``kompakt admin compact``'s table (its header names the cleaner's counters)."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if "records_read" in line)
    header = [cell.strip() for cell in lines[at].strip("┃ ").split("┃")]
    row = [cell.strip() for cell in lines[at + 2].strip("│ ").split("│")]
    return dict(zip(header, row, strict=True))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path / "kompakt-data")
    yield process
    assert process.stop() == 0, process.stderr_path.read_text()


@pytest.mark.clients
def test_the_readme_walkthrough_runs_as_printed(served: BrokerProcess, tmp_path: Path) -> None:
    admin = re.search(r"admin (http://\S+)", served.ready_line)
    assert admin
    (tmp_path / "examples").mkdir()
    for name in ("backup.yaml", "restore.yaml"):
        text = (ROOT / "examples" / name).read_text().replace("localhost:9092", served.bootstrap)
        (tmp_path / "examples" / name).write_text(text)
    script = walkthrough().replace("source .venv/bin/activate", "set -euo pipefail")
    script = script.replace("localhost:9092", served.bootstrap).replace(
        "./kompakt-data", str(served.data_dir)
    )
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "KOMPAKT_ADMIN_URL": admin.group(1),
        "KOMPAKT_BOOTSTRAP": served.bootstrap,
        "COLUMNS": "200",
    }
    assert shutil.which("bash")
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "Created topic user-profiles." in out
    assert "user_id_99:Jane\nuser_id_98:Bob\nuser_id_99:Jane Doe\nuser_id_99:null\n" in out
    # The compaction step shows its effect: the cleaner's own numbers, then the records left.
    stats = compact_stats(out)
    assert (stats["records_read"], stats["records_written"]) == ("4", "2"), out
    # After the compaction Jane's values are gone; Kafka's key separator is a tab by default.
    assert "user_id_98\tBob\nuser_id_99\tnull\n" in out, out
    assert "ok: the restore can run" in out
    assert (tmp_path / "map.html").stat().st_size > 10_000
    assert list((tmp_path / "backups").iterdir())


def test_the_configuration_page_is_generated_from_the_definitions() -> None:
    """docs/configuration.md carries markers, not copies: the tables come from the code."""
    from docs.hooks import on_page_markdown

    page = (ROOT / "docs" / "configuration.md").read_text()
    assert "<!-- generated:topic-config-table -->" in page
    rendered = on_page_markdown(page)
    assert "| `internal.segment.bytes` |" in rendered and "| `segment.bytes` |" in rendered
    assert "<!-- generated:" not in rendered
