"""The registry of command groups: each entry is a ``register(app)`` function of a CLI module.

A new command group is one module with a ``register(app: typer.Typer) -> None`` function, listed
here once.
"""

from __future__ import annotations

from collections.abc import Callable

import typer

Registrar = Callable[[typer.Typer], None]

REGISTRARS: list[Registrar] = []


def _cluster_commands() -> list[Registrar]:
    """``topic``, ``produce``, ``consume``, ``group``: commands against any Kafka-compatible cluster."""
    from kompakt.cli import consume_cmd, group_cmd, produce_cmd, topic_cmd

    return [topic_cmd.register, produce_cmd.register, consume_cmd.register, group_cmd.register]


REGISTRARS += _cluster_commands()


def _offline_commands() -> list[Registrar]:
    """``log dump|verify|explain|compact``, ``sizing`` and ``warmup``: offline tools."""
    from kompakt.cli import log_cmd, sizing, warmup_cmd

    return [log_cmd.register, sizing.register, warmup_cmd.register]


REGISTRARS += _offline_commands()


def _admin_commands() -> list[Registrar]:
    """``admin …``: the running broker's admin HTTP endpoint."""
    from kompakt.cli import admin_cmd

    return [admin_cmd.register]


REGISTRARS += _admin_commands()


def _backup_commands() -> list[Registrar]:
    """``backup`` (and ``validate-restore``, ``list``, ``describe``) and ``restore``."""
    from kompakt.cli import backup_cmd

    return [backup_cmd.register]


REGISTRARS += _backup_commands()


def _kafka_added_tools() -> None:
    """The tools added beside kafka_tools (issue 28): each registers itself with ``kafka_tools.tool``."""
    from kompakt.cli import (
        kafka_delete_records,
        kafka_get_offsets,
        kafka_leader_election,
        kafka_log_dirs,
        kafka_perf_tests,
        kafka_transactions,
    )

    del kafka_delete_records, kafka_get_offsets, kafka_leader_election, kafka_log_dirs
    del kafka_perf_tests, kafka_transactions


def _kafka_tool_commands() -> list[Registrar]:
    """``kafka-topics``, ``kafka-configs``, ``kafka-console-producer`` ...: Kafka's spellings."""
    from kompakt.cli import kafka_acls, kafka_tools

    del kafka_acls  # imported for its @_tool registration
    _kafka_added_tools()
    return [kafka_tools.register]


REGISTRARS += _kafka_tool_commands()


def _storage_commands() -> list[Registrar]:
    """``storage add-scram``: SCRAM users written into a data directory before the broker starts."""
    from kompakt.cli import scram_cmd

    return [scram_cmd.register]


REGISTRARS += _storage_commands()


def _table_commands() -> list[Registrar]:
    """``table get|scan|counts|export|diff``: a compacted topic as a table."""
    from kompakt.cli import table_cmd

    return [table_cmd.register]


REGISTRARS += _table_commands()
