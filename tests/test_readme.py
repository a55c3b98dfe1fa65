"""The README's configuration tables are generated from the code and must not drift from it."""

from __future__ import annotations

from pathlib import Path

from kompakt.config.doc import broker_config_table, topic_config_table

README = Path(__file__).resolve().parents[1] / "README.md"


def _section(text: str, name: str) -> str:
    start = text.index(f"<!-- {name}:start -->") + len(f"<!-- {name}:start -->")
    return text[start : text.index(f"<!-- {name}:end -->")].strip()


def test_topic_config_table_matches_the_code() -> None:
    assert _section(README.read_text(), "topic-config-table") == topic_config_table()


def test_broker_config_table_matches_the_code() -> None:
    assert _section(README.read_text(), "broker-config-table") == broker_config_table()


def test_quickstart_shows_exactly_the_two_commands() -> None:
    text = README.read_text()
    assert "make run" in text and "make test" in text
