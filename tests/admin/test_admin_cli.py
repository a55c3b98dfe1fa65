"""``kompakt admin …`` against a running in-process broker, and against nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from kompakt.admin.client import AdminRequestError, AdminUnreachableError
from kompakt.cli.admin_cmd import register
from kompakt.testing import InProcessBroker

from .conftest import COMPACTED, produce

runner = CliRunner()


def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Root."""

    register(app)
    return app


def run(broker: InProcessBroker, *args: str) -> str:
    result = runner.invoke(cli(), ["admin", *args, "--admin-url", broker.admin_url])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 0, result.output
    return result.output


def test_partitions_roll_compact_and_retry(broker: InProcessBroker) -> None:
    produce(broker.bootstrap_servers, COMPACTED, [(b"a", b"1"), (b"a", b"2"), (b"b", b"1")])
    assert "partitions at" in run(broker, "partitions")
    rolled = json.loads(run(broker, "roll", COMPACTED, "--partition", "0", "--output", "json"))
    assert rolled["partitions"][0]["rolled"] is True
    stats = json.loads(run(broker, "compact", COMPACTED, "-p", "0", "-o", "json"))["partitions"][0]
    assert (stats["records_read"], stats["records_written"]) == (3, 2)
    assert run(broker, "compact", COMPACTED, "-p", "0").strip()  # the table form
    assert [r.offset for r in broker.records(COMPACTED, 0)] == [1, 2]
    data = json.loads(run(broker, "partitions", COMPACTED, "-o", "json"))
    assert data["partitions"][0]["last_clean"]["records_written"] == 2
    assert "started" in run(broker, "compact", COMPACTED, "--no-wait")
    broker.admin.wait_background()
    assert "was not marked uncleanable" in run(broker, "retry", COMPACTED, "1")
    assert "kafka_log_logcleaner_max_clean_time_secs" in run(broker, "metrics")
    report = json.loads(run(broker, "explain", COMPACTED, "-p", "0", "-o", "json"))
    assert report["partitions"][0]["partition"] == 0
    assert "compacted-0" in run(broker, "explain", COMPACTED, "-p", "0")


def test_clock_show_and_advance(broker: InProcessBroker) -> None:
    start = broker.now_ms()
    assert str(start) in run(broker, "clock", "show")
    data = json.loads(run(broker, "clock", "advance", "25h", "-o", "json"))
    assert data == {"mode": "manual", "now_ms": start + 90_000_000, "advanced_ms": 90_000_000}
    assert broker.now_ms() == start + 90_000_000
    result = runner.invoke(cli(), ["admin", "clock", "advance", "soon", "--admin-url", broker.admin_url])
    assert result.exit_code != 0 and "cannot parse duration" in str(result.exception)


def test_errors_are_kompakt_errors(broker: InProcessBroker, real_clock_broker: InProcessBroker) -> None:
    with pytest.raises(AdminRequestError, match=r"unknown topic 'nope' \(HTTP 404\)"):
        run(broker, "roll", "nope")
    with pytest.raises(AdminRequestError, match="system clock"):
        run(real_clock_broker, "clock", "show")


def test_unreachable_endpoint_is_one_line_and_exit_1() -> None:
    code = (
        "from kompakt.cli import commands\n"
        "from kompakt.cli.admin_cmd import register\n"
        "if register not in commands.REGISTRARS: commands.REGISTRARS.append(register)\n"
        "from kompakt.cli.main import main\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, "admin", "partitions", "--admin-url", "http://127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == ["error: cannot reach the admin endpoint at http://127.0.0.1:1: Connection refused"]
    with pytest.raises(AdminUnreachableError):
        from kompakt.admin.client import AdminClient

        AdminClient("http://127.0.0.1:1").clock()


def test_compact_says_when_it_waits_for_the_first_compile(
    broker: InProcessBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 17: on a fresh install the first compaction waits for the background compile of the
    native kernels; the command says so instead of hanging silently for many seconds."""
    produce(broker.bootstrap_servers, COMPACTED, [(b"a", b"1"), (b"a", b"2")])
    quiet = run(broker, "compact", COMPACTED, "-p", "0")
    assert "waiting for the native kernels" not in quiet
    cleaner = broker.admin.cleaner
    assert cleaner is not None and cleaner.kernels_compiling is False
    assert json.loads(run(broker, "partitions", "-o", "json"))["kernels_compiling"] is False
    monkeypatch.setattr(type(cleaner), "kernels_compiling", property(lambda _self: True))
    assert json.loads(run(broker, "partitions", "-o", "json"))["kernels_compiling"] is True
    said = run(broker, "compact", COMPACTED, "-p", "0")
    assert "waiting for the native kernels to finish compiling (first run only" in said
    assert "kompakt warmup" in said
