"""Each owner's typed settings are built by one ``from_broker`` and take every default from the
config tables: a default is written once, in its table (issue 32)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from typing import Any

import pytest

from kompakt.broker.groups.config import ConsumerGroupConfig, GroupConfig
from kompakt.broker.txn.state_manager import TxnConfig
from kompakt.config.broker import BrokerConfig
from kompakt.config.tables import KOMPAKT_BROKER_CONFIGS
from kompakt.log.config import LogConfig
from kompakt.server.app import ServerSettings

TYPED_WITH_DEFAULTS: list[Any] = [GroupConfig, ConsumerGroupConfig, TxnConfig, ServerSettings]


@pytest.mark.parametrize("settings", TYPED_WITH_DEFAULTS, ids=lambda c: c.__name__)
def test_defaults_are_the_tables(settings: Any) -> None:
    """Built from a broker config that sets nothing, the settings equal their own defaults."""
    assert settings() == settings.from_broker(BrokerConfig())


@pytest.mark.parametrize("settings", TYPED_WITH_DEFAULTS, ids=lambda c: c.__name__)
def test_from_broker_reads_every_field_from_the_broker_config(settings: Any) -> None:
    """Each field follows its broker config: set every config ``from_broker`` reads to a value of
    its own, and every field of the result moves off its default."""
    source = textwrap.dedent(inspect.getsource(settings.from_broker))
    names = [
        node.args[0].value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr.startswith("get_")
        and isinstance(node.args[0], ast.Constant)
    ]
    assert len(names) == len(dataclasses.fields(settings)), names
    changed = {name: _another_value(name) for name in names}
    built = settings.from_broker(BrokerConfig(static=changed))
    defaults = settings()
    unchanged = [
        f.name for f in dataclasses.fields(settings) if getattr(built, f.name) == getattr(defaults, f.name)
    ]
    assert unchanged == []


def _another_value(name: str) -> str:
    """A valid value other than the default, that keeps every cross-field rule."""
    special = {
        "group.min.session.timeout.ms": "5000",
        "group.max.session.timeout.ms": "1700000",
        "group.consumer.session.timeout.ms": "50000",
        "group.consumer.min.session.timeout.ms": "44000",
        "group.consumer.max.session.timeout.ms": "61000",
        "group.consumer.heartbeat.interval.ms": "6000",
        "group.consumer.min.heartbeat.interval.ms": "4000",
        "group.consumer.max.heartbeat.interval.ms": "16000",
        "group.consumer.assignors": "range,uniform",
        "group.consumer.migration.policy": "upgrade",
        "transaction.partition.verification.enable": "false",
    }
    if name in special:
        return special[name]
    default = KOMPAKT_BROKER_CONFIGS[name].default
    assert isinstance(default, int) and not isinstance(default, bool), name
    return str(default - 1)


@pytest.mark.parametrize("settings", [*TYPED_WITH_DEFAULTS, LogConfig], ids=lambda c: c.__name__)
def test_no_default_is_written_twice(settings: Any) -> None:
    """No field default is a literal: each is read from the tables (``int_default`` and friends)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(settings)))
    [cls] = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    literals = [
        stmt.target.id
        for stmt in cls.body
        if isinstance(stmt, ast.AnnAssign)
        and isinstance(stmt.target, ast.Name)
        and stmt.value is not None
        and not isinstance(stmt.value, ast.Call)
    ]
    assert literals == []
