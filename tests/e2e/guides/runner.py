"""Run a guide's shell line through kompakt, in-process, the way a user types it.

A guide line such as ``bin/kafka-topics.sh --bootstrap-server localhost:9092 --create ...`` becomes
``kompakt kafka-topics --bootstrap-server <the test broker> --create ...``: the tool name loses its
``bin/`` and ``.sh``, the guide's host (``localhost:9092``, ``kafka:9092``) becomes the broker's
address and the guide's paths become the test's. Nothing else changes: every flag and value is
the guide's. Commands run in-process through ``kompakt.cli.main.main`` (a subprocess per line
would cost ~0.7 s each), with stdin, stdout and stderr captured, exit codes as the console script
gives them.
"""

from __future__ import annotations

import io
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass

import pytest

TOOLS = ("kafka-topics", "kafka-configs", "kafka-console-producer", "kafka-console-consumer")
TOOLS += ("kafka-consumer-groups", "kafka-dump-log", "kafka-backup")


@dataclass
class Ran:
    line: str
    argv: list[str]
    code: int
    out: str
    err: str


def kompakt_argv(line: str, replacements: Mapping[str, str]) -> list[str]:
    """The kompakt command line of one guide line (``$ `` prompt, ``bin/`` and ``.sh`` dropped)."""
    text = line.strip().removeprefix("$ ")
    for old, new in replacements.items():
        text = text.replace(old, new)
    words = shlex.split(text)
    tool = words[0].rsplit("/", 1)[-1].removesuffix(".sh")
    if tool == "kompakt":
        return words[1:]
    assert tool in TOOLS, f"not a Kafka tool line: {line!r}"
    return [tool, *words[1:]]


class GuideRunner:
    """Runs guide lines in-process; ``run`` returns exit code and output of one line."""

    def __init__(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        self.capsys = capsys
        self.monkeypatch = monkeypatch
        self.replacements: dict[str, str] = {}
        self.env: dict[str, str] = {}

    def run(self, line: str, stdin: str = "") -> Ran:
        from kompakt.cli import main as cli_main
        from kompakt.cli.output import console, err_console

        argv = kompakt_argv(line, self.replacements)
        self.capsys.readouterr()
        mp = self.monkeypatch
        mp.setattr(sys, "argv", ["kompakt", *argv])
        mp.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8"))))
        for name, value in self.env.items():
            mp.setenv(name, value)
        mp.setattr(console, "_file", None, raising=False)
        mp.setattr(err_console, "_file", None, raising=False)
        mp.setattr(console, "width", 250, raising=False)
        mp.setattr(err_console, "width", 1000, raising=False)
        code = 0
        try:
            cli_main.main()
        except SystemExit as exc:
            code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
        captured = self.capsys.readouterr()
        return Ran(line, argv, code, captured.out, captured.err)

    def ok(self, line: str, stdin: str = "") -> Ran:
        ran = self.run(line, stdin)
        assert ran.code == 0, f"{line}\n-> kompakt {' '.join(ran.argv)}\nexit {ran.code}\n{ran.err}{ran.out}"
        return ran


def lines_of(block: str) -> list[str]:
    """The commands of a guide block: ``\\``-continued lines joined, comments and blanks dropped."""
    joined: list[str] = []
    current = ""
    for raw in block.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        joined.append(current + line)
        current = ""
    return joined


__all__ = ["GuideRunner", "Ran", "kompakt_argv", "lines_of"]
