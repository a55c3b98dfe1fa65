"""``kompakt serve``'s fast start: plain command lines parsed without typer, the rest left to typer."""

from __future__ import annotations

from pathlib import Path

import pytest

from kompakt.cli.main import _fast_serve_arguments
from kompakt.cli.serve import SERVE_OPTIONS


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


def test_fast_start_options_match_the_typer_command() -> None:
    """The fast start's table and ``kompakt serve --help``'s options never drift apart."""
    import typing

    import typer

    from kompakt.cli.serve_command import serve_command

    declared: dict[str, tuple[str, object, bool]] = {}
    for name, hint in typing.get_type_hints(serve_command, include_extras=True).items():
        if name == "return":
            continue
        base, *extras = typing.get_args(hint)
        info = next(e for e in extras if isinstance(e, typer.models.OptionInfo))
        flags = [
            d for d in (info.default, *(info.param_decls or ())) if isinstance(d, str) and d.startswith("--")
        ]
        kinds = [a for a in typing.get_args(base) if a is not type(None)] or [base]
        repeatable = typing.get_origin(kinds[0]) is list
        kind = str if repeatable else kinds[0]
        for flag in flags:
            declared[flag] = (name, kind, repeatable)
    table = {flag: (name, repeatable) for flag, (name, _, repeatable) in SERVE_OPTIONS.items()}
    assert table == {flag: (name, repeatable) for flag, (name, _, repeatable) in declared.items()}
    converted = {flag: type(SERVE_OPTIONS[flag][1]("1")) for flag in SERVE_OPTIONS}
    expected = {
        flag: (int if kind is int else Path if kind is Path else str)
        for flag, (_, kind, _) in declared.items()
    }
    assert {f: (Path if issubclass(t, Path) else t) for f, t in converted.items()} == expected


def test_version_and_help_go_through_typer(capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from kompakt import __version__
    from kompakt.cli import main as cli_main

    for argv, expected in ((["--version"], f"kompakt {__version__}"), (["serve", "--help"], "--data-dir")):
        old = sys.argv
        sys.argv = ["kompakt", *argv]
        try:
            with pytest.raises(SystemExit) as exited:
                cli_main.main()
        finally:
            sys.argv = old
        assert exited.value.code == 0
        assert expected in capsys.readouterr().out
