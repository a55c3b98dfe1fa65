"""Two ways to run the ``kompakt`` cluster commands in a test.

``run`` invokes the commands in-process (typer's runner, about a millisecond of overhead) and maps
kompakt errors to exit codes as ``kompakt.cli.main.main`` does; ``run_cli`` starts the real
``kompakt`` entry point in a subprocess, for what only the whole program shows (one error line,
exit codes, stdin handling). Most tests use ``run`` to keep the suite fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import typer
from typer.testing import CliRunner

from kompakt.cli import consume_cmd, group_cmd, produce_cmd, topic_cmd
from kompakt.cli.output import CliUsageError
from kompakt.errors import KompaktError
from tests.support.serve import BrokerProcess

SUBPROCESS_DEADLINE_S = 60.0


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    seconds: float = 0.0


def _app() -> typer.Typer:
    app = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
    for register in (topic_cmd.register, produce_cmd.register, consume_cmd.register, group_cmd.register):
        register(app)
    return app


APP = _app()


def run(broker: BrokerProcess | str, *args: str, stdin: str | bytes | None = None) -> Outcome:
    """Run a command in-process against ``broker`` (or a bootstrap string); kompakt errors become
    exit 1 (2 for usage), as ``kompakt.cli.main.main`` maps them."""
    bootstrap = broker if isinstance(broker, str) else broker.bootstrap
    started = time.monotonic()
    result = CliRunner().invoke(APP, [*args, "--bootstrap", bootstrap], input=stdin)
    stderr = result.stderr
    code = result.exit_code
    if isinstance(result.exception, KompaktError):
        code = 2 if isinstance(result.exception, CliUsageError) else 1
        stderr += f"error: {result.exception}\n"
    elif result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Outcome(code, result.stdout, stderr, time.monotonic() - started)


def run_cli(*args: str, stdin: str | None = None) -> Outcome:
    """Run the real ``kompakt`` program (wide terminal, so an error line is not wrapped)."""
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-m", "kompakt.cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_DEADLINE_S,
        env={**{k: v for k, v in os.environ.items() if k != "KOMPAKT_BOOTSTRAP"}, "COLUMNS": "1000"},
        cwd=Path(__file__).parent,
    )
    return Outcome(completed.returncode, completed.stdout, completed.stderr, time.monotonic() - started)
