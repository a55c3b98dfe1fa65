"""``kompakt.cli.main.main`` run many times in one process, as the in-process CLI tests do.

Every command line used to register the command groups on the typer app again, and typer builds
every registered group on every command line: the hundredth in-process command took tens of
seconds on a loaded machine, and a CLI-heavy test late in a pytest worker ran past its timeout.
"""

from __future__ import annotations

from collections.abc import Callable

from kompakt.cli.app import app
from tests.support.log_dirs import CliResult


def test_each_command_group_is_registered_once_however_often_main_runs(
    cli: Callable[..., CliResult],
) -> None:
    first = cli("--help")
    assert first.code == 0, first.err
    for _ in range(3):
        again = cli("--help")
        assert (again.code, again.out) == (0, first.out)
    groups = [group.name for group in app.registered_groups]
    commands = [command.name for command in app.registered_commands]
    assert "table" in groups and "kafka-topics" in commands
    assert sorted(groups) == sorted(set(groups)), groups
    assert sorted(commands) == sorted(set(commands)), commands
