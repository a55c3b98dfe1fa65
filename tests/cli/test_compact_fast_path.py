"""``kompakt log compact``'s fast start (issue 33): a plain command line runs without typer, and with
the precompiled kernels without numba, and shows exactly what the typer command shows.

The comparisons run the real program in fresh interpreters, as an operator does: the fast path
through ``python -m kompakt.cli.main``, the typer path through the typer app itself, each on its
own copy of the same directory.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

from kompakt.cli.compact_cmd import COMPACT_OPTIONS, compact_arguments
from kompakt.cli.main import _fast_compact_arguments
from kompakt.cli.output import OutputFormat
from kompakt.records import precompiled
from kompakt.records.batch import iter_batches
from kompakt.records.record import decode_records
from tests.support.log_dirs import keys

DEADLINE_S = 120.0
MODULES = ("numba", "llvmlite", "typer", "click", "rich.progress")

FAST = (
    "import sys\n"
    "from kompakt.cli.main import main\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    "    print('MODULES', sorted(m for m in {modules!r} if m in sys.modules), file=sys.stderr)\n"
)
TYPER = (
    "import kompakt.cli.main as m\n"
    "m._run_compact_directly = lambda argv: False\n"  # the same main(), only the fast path off
    "m.main()\n"
)


def test_plain_compact_command_lines_are_parsed() -> None:
    argv = ["--debug", "log", "compact", "d", "--config", "a=1", "--config=b=2", "-o", "json"]
    assert _fast_compact_arguments(argv) == (
        True,
        {"path": Path("d"), "config": ["a=1", "b=2"], "output": OutputFormat.JSON},
    )
    assert _fast_compact_arguments(
        [
            "log",
            "compact",
            "--broker-config",
            "x=1",
            "--server-properties=s.properties",
            "p",
            "--output",
            "table",
        ]
    ) == (
        False,
        {
            "path": Path("p"),
            "broker_configs": ["x=1"],
            "server_properties": Path("s.properties"),
            "output": OutputFormat.TABLE,
        },
    )
    assert _fast_compact_arguments(["log", "compact", "p"]) == (False, {"path": Path("p")})


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["log"],
        ["log", "compact"],
        ["log", "compact", "--help"],
        ["log", "compact", "p", "--help"],
        ["log", "compact", "p", "q"],
        ["log", "compact", "p", "-o", "JSON"],
        ["log", "compact", "p", "-ojson"],
        ["log", "compact", "p", "-o=json"],
        ["log", "compact", "p", "-o", "json", "-o", "table"],
        ["log", "compact", "p", "--config"],
        ["log", "compact", "p", "--config", "--output"],
        ["log", "compact", "p", "--bogus", "1"],
        ["log", "compact", "--", "p"],
        ["log", "compact", "", "-o", "json"],
        ["log", "compact", "p", "--server-properties", ""],
        ["log", "compact", "p", "--server-properties", "a", "--server-properties", "b"],
        ["--version", "log", "compact", "p"],
        ["log", "dump", "p"],
        ["serve"],
    ],
)
def test_anything_else_goes_to_typer(argv: list[str]) -> None:
    assert _fast_compact_arguments(argv) is None


def test_fast_path_options_match_the_typer_command() -> None:
    """The fast path's table and ``kompakt log compact --help``'s options never drift apart."""
    import typer

    from kompakt.cli.log_cmd import compact_command

    declared: dict[str, tuple[str, bool]] = {}
    positional = []
    for name, hint in typing.get_type_hints(compact_command, include_extras=True).items():
        if name == "return":
            continue
        base, *extras = typing.get_args(hint)
        info = next(e for e in extras if isinstance(e, typer.models.ParameterInfo))
        if isinstance(info, typer.models.ArgumentInfo):
            positional.append(name)
            continue
        kinds = [a for a in typing.get_args(base) if a is not type(None)] or [base]
        flags = [
            d for d in (info.default, *(info.param_decls or ())) if isinstance(d, str) and d.startswith("-")
        ]
        for flag in flags:
            declared[flag] = (name, typing.get_origin(kinds[0]) is list)
    assert positional == ["path"]
    assert declared == COMPACT_OPTIONS
    assert compact_arguments(["p", "-o", "json"]) == {"path": Path("p"), "output": OutputFormat.JSON}


def _partition(root: Path, build: Any) -> Path:
    """A compacted topic with two segments of overwritten keys and tombstones, and a topic that
    is not compacted."""
    b = build("data")
    log = b.topic("t", cleanup_policy="compact", segment_bytes="1048576")
    for _ in range(3):
        b.put(log, keys(400))
    b.put(log, keys(50, value=None))
    log.roll()
    b.put(log, keys(5, prefix="active"))
    other = b.topic("d", cleanup_policy="delete")
    b.put(other, keys(10))
    return b.close()


def _run(kind: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    script = FAST.format(modules=MODULES) if kind == "fast" else TYPER
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        check=False,
    )


def _modules(stderr: str) -> list[str]:
    found = re.search(r"^MODULES (\[.*\])$", stderr, re.MULTILINE)
    assert found is not None, stderr
    loaded: list[str] = json.loads(found.group(1).replace("'", '"'))
    return loaded


def _same_output(text: str) -> str:
    """The output with what differs from run to run removed: the clean's seconds, log times."""
    text = re.sub(r"^MODULES .*\n", "", text, flags=re.MULTILINE)
    text = re.sub(r'"seconds": [0-9.]+', '"seconds": S', text)
    text = re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", "", text, flags=re.MULTILINE)
    text = re.sub(r"(│ *)[0-9]+\.[0-9]+( *│ *[0-9]+ *│[^\n]*\n)", r"\1S\2", text)
    # A seconds cell one digit wider widens its column: compare the table's cells, not its widths.
    return re.sub(r"([ ─━═])\1+", r"\1", text)


def _files(directory: Path) -> dict[str, object]:
    """Every file's bytes, the segments' as their records: a tombstone's batch is stamped with its
    delete horizon, the clean's time plus ``delete.retention.ms``, which differs between runs."""
    found: dict[str, object] = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        name = str(path.relative_to(directory))
        if path.suffix == ".log":
            batches = iter_batches(path.read_bytes())
            found[name] = [(r.offset, r.key, r.value) for b in batches for r in decode_records(b)]
        else:
            found[name] = path.read_bytes()
    return found


@pytest.mark.parametrize("output", ["json", "table"])
def test_the_fast_path_shows_what_the_typer_command_shows(tmp_path: Path, build: Any, output: str) -> None:
    source = _partition(tmp_path, build)
    results = {}
    for kind in ("fast", "typer"):
        copy = tmp_path / kind[:4]  # as long as each other: the table's title is centred
        shutil.copytree(source, copy)
        done = _run(
            kind, ["log", "compact", str(copy), "-o", output, "--config", "min.cleanable.dirty.ratio=0"]
        )
        results[kind] = (done.returncode, _same_output(done.stdout.replace(str(copy), "DIR")), done)
        assert done.returncode == 0, done.stderr
    fast, typer_run = results["fast"], results["typer"]
    assert fast[:2] == typer_run[:2]
    assert _same_output(fast[2].stderr.replace(str(tmp_path / "fast"), "DIR")) == _same_output(
        typer_run[2].stderr.replace(str(tmp_path / "type"), "DIR")
    )
    if output == "json":
        [row] = json.loads(fast[2].stdout)
        assert row["partition"] == "t-0" and row["records_read"] == 1250 and row["records_written"] == 400
    else:
        assert "compacted DIR" in fast[1] and "t-0" in fast[1]
    assert _files(tmp_path / "fast") == _files(tmp_path / "type")


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["{dir}/nowhere"], 2, "error: "),
        (
            ["{dir}", "--config", "no.such.config=1"],
            2,
            "error: --config: unknown topic config 'no.such.config'",
        ),
        (["{dir}", "--config", "novalue"], 2, "error: --config expects name=value, got 'novalue'"),
        (["{dir}/t-0/00000000000000000000.log"], 2, "error: compact needs a data directory"),
        (["{dir}", "--broker-config", "log.cleaner.dedupe.buffer.size=x"], 2, "error: "),
    ],
)
def test_errors_and_exit_codes_are_the_typer_commands(
    tmp_path: Path, build: Any, args: list[str], code: int, message: str
) -> None:
    source = _partition(tmp_path, build)
    argv = ["log", "compact", *(a.format(dir=source) for a in args)]
    fast, typer_run = _run("fast", argv), _run("typer", argv)
    assert (fast.returncode, fast.stdout) == (typer_run.returncode, typer_run.stdout) == (code, "")
    assert _same_output(fast.stderr) == _same_output(typer_run.stderr)
    assert message in fast.stderr


def test_help_is_typers(tmp_path: Path) -> None:
    done = _run("fast", ["log", "compact", "--help"])
    assert done.returncode == 0 and "Usage:" in done.stdout and "--server-properties" in done.stdout
    assert "typer" in _modules(done.stderr)


def test_a_precompiled_compact_imports_neither_numba_nor_typer(tmp_path: Path, build: Any) -> None:
    """With the precompiled kernels (the wheel's and the test run's case) the command's process
    never imports numba, llvmlite, typer or click (nor rich's progress display for JSON); with
    ``KOMPAKT_KERNELS=jit`` numba compiles (loads from its cache) and the result is the same."""
    if not precompiled.status().precompiled:
        pytest.fail(f"the test run should use the precompiled kernels (make native): {precompiled.status()}")
    source = _partition(tmp_path, build)
    rows = {}
    for mode in ("auto", "jit"):
        copy = tmp_path / mode
        shutil.copytree(source, copy)
        done = _run("fast", ["log", "compact", str(copy), "-o", "json"], {"KOMPAKT_KERNELS": mode})
        assert done.returncode == 0, done.stderr
        loaded = _modules(done.stderr)
        if mode == "auto":
            assert loaded == [], loaded
        else:
            assert "numba" in loaded and "typer" not in loaded, loaded
        [rows[mode]] = json.loads(done.stdout)
        rows[mode].pop("seconds")
    assert rows["auto"] == rows["jit"]
    assert _files(tmp_path / "auto") == _files(tmp_path / "jit")
