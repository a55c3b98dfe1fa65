"""``kompakt warmup``: compile the native cleaner kernels now, and the first-run notice.

See :mod:`kompakt.cleaner.warmup` for why the first compaction after an install is slow without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kompakt.cli import output

if TYPE_CHECKING:  # typer is not imported by `kompakt log compact`'s fast path, which uses this module
    import typer


def announce_kernel_compile() -> bool:
    """Say so on stderr when the next clean must compile the kernels first; True if it must."""
    from kompakt.cleaner.warmup import COMPILE_ESTIMATE, kernels_ready

    if kernels_ready():
        return False
    output.err_console.print(
        f"compiling native kernels, first run only ({COMPILE_ESTIMATE}; "
        "`kompakt warmup` does it ahead of time)",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return True


def warmup_command() -> None:
    """Make sure the native kernels are ready (the cleaner's and the table index's), so the first
    compaction takes under a second: a wheel install has them precompiled and there is nothing
    to do; otherwise numba compiles them now."""
    from kompakt.cleaner.warmup import warm_up
    from kompakt.records import precompiled
    from kompakt.table.warmup import warm_up as warm_up_table

    state = precompiled.status()
    if state.precompiled:
        output.console.print(
            f"native kernels {state.reason}: nothing to compile", markup=False, highlight=False
        )
        return
    output.err_console.print(
        f"not precompiled: {state.reason}", markup=False, highlight=False, soft_wrap=True
    )
    cold = announce_kernel_compile()
    seconds = warm_up() + warm_up_table()
    verb = "compiled" if cold else "loaded (already compiled)"
    output.console.print(f"native kernels {verb} in {seconds:.2f} s", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Attach ``kompakt warmup``."""
    if not any(command.name == "warmup" for command in app.registered_commands):
        app.command("warmup")(warmup_command)
