"""``kompakt serve``'s fast start: plain command lines parsed without typer, the rest left to typer."""

from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.cli.main import _fast_serve_arguments


def test_plain_serve_command_lines_are_parsed() -> None:
    argv = ["--debug", "serve", "--data-dir", "d", "--port=0", "--override", "a=1", "--override=b=2"]
    assert _fast_serve_arguments(argv) == (
        True,
        {"data_dir": Path("d"), "port": 0, "override": ["a=1", "b=2"]},
    )
    assert _fast_serve_arguments(["serve", "--admin-port", "-1", "--clock", "manual"]) == (
        False,
        {"admin_port": -1, "clock": "manual"},
    )
    assert _fast_serve_arguments(["serve"]) == (False, {})


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--version"],
        ["topic", "list"],
        ["serve", "--help"],
        ["serve", "--port", "abc"],
        ["serve", "--port", "1.0"],
        ["serve", "--port"],
        ["serve", "--bogus", "1"],
        ["serve", "extra"],
        ["serve", "--port", "1", "--port", "2"],
    ],
)
def test_anything_else_goes_to_typer(argv: list[str]) -> None:
    assert _fast_serve_arguments(argv) is None
