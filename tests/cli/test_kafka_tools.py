"""The Kafka-spelled tools' own parsing and formatting, without a broker (issue 17).

What a guide line does end to end is in ``tests/e2e/guides``; here: Kafka's ``--add-config``
list syntax, flags kompakt refuses with a reason, ``--help``, the ``.sh`` aliases, and the console
consumer's DefaultMessageFormatter lines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kompakt.cli import kafka_tools, topic_cmd
from kompakt.cli.app import app, register_commands
from kompakt.cli.consume_cmd import KafkaMessageFormatter
from kompakt.cli.output import CliUsageError


def test_add_config_lists_group_commas_in_brackets() -> None:
    assert kafka_tools._split_config_list("k1=v1,k2=[v1,v2,v2],k3=v3") == [
        ("k1", "v1"),
        ("k2", "v1,v2,v2"),
        ("k3", "v3"),
    ]
    assert kafka_tools._split_config_list("cleanup.policy=[compact,delete]") == [
        ("cleanup.policy", "compact,delete")
    ]
    assert kafka_tools._split_config_list("segment.ms=") == [("segment.ms", "")]
    with pytest.raises(CliUsageError, match="--add-config expects"):
        kafka_tools._split_config_list("no-equals")


@pytest.mark.parametrize(
    ("tool", "argv", "message"),
    [
        ("kafka-topics", ["--create", "--list", "--topic", "t"], "give exactly one of --list"),
        ("kafka-topics", ["--create"], "--create needs --topic"),
        ("kafka-topics", ["--alter", "--topic", "t", "--config", "a=b"], "--config is only for --create"),
        (
            "kafka-topics",
            ["--create", "--topic", "t", "--replica-assignment", "0:1"],
            "kompakt is one broker",
        ),
        (
            "kafka-topics",
            ["--list", "--command-config", "admin.properties"],
            "--command-config is not supported",
        ),
        ("kafka-topics", ["--describe", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (
            "kafka-configs",
            ["--describe", "--entity-type", "clients", "--entity-name", "alice"],
            "topics, brokers and users",
        ),
        (
            "kafka-configs",
            ["--alter", "--user", "alice", "--add-config", "producer_byte_rate=1024"],
            "SCRAM credentials only",
        ),
        (
            "kafka-configs",
            [
                "--alter",
                "--entity-type",
                "users",
                "--entity-name",
                "a",
                "--add-config",
                "SCRAM-SHA-256=[iterations=8192]",
            ],
            "password is required",
        ),
        ("kafka-configs", ["--alter", "--entity-type", "topics", "--entity-name", "t"], "needs --add-config"),
        (
            "kafka-configs",
            ["--alter", "--entity-type", "topics", "--entity-default", "--add-config", "a=b"],
            "applies to brokers",
        ),
        (
            "kafka-console-consumer",
            ["--topic", "t", "--formatter", "my.Formatter"],
            "DefaultMessageFormatter",
        ),
        ("kafka-console-consumer", ["--topic", "t", "--offset", "5"], "--offset needs --partition"),
        (
            "kafka-console-consumer",
            ["--topic", "t", "--property", "print.keys=true"],
            "unknown --property 'print.keys'",
        ),
        ("kafka-console-consumer", [], "exactly one of --topic and --include"),
        ("kafka-console-producer", ["--topic", "t", "--line-reader", "my.Reader"], "LineMessageReader"),
        ("kafka-console-producer", [], "the following arguments are required: --topic"),
        (
            "kafka-consumer-groups",
            ["--reset-offsets", "--group", "g", "--from-file", "plan.csv"],
            "--from-file is not supported",
        ),
        ("kafka-consumer-groups", ["--describe"], "needs --group"),
        ("kafka-dump-log", ["--files", "x.log", "--key-decoder-class", "K"], "--key-decoder-class"),
    ],
)
def test_flags_kompakt_cannot_honour_are_usage_errors(tool: str, argv: list[str], message: str) -> None:
    with pytest.raises(CliUsageError) as raised:
        kafka_tools.run_tool(
            tool, [*argv, "--bootstrap-server", "127.0.0.1:1"] if tool != "kafka-dump-log" else argv
        )
    assert message in str(raised.value)


def test_help_lists_kafkas_flags_and_the_sh_alias_runs_the_same_tool() -> None:
    register_commands()
    runner = CliRunner()
    shown = runner.invoke(app, ["kafka-topics", "--help"])
    assert shown.exit_code == 0
    for flag in ("--bootstrap-server", "--create", "--topic", "--config", "--partitions", "--if-not-exists"):
        assert flag in shown.stdout
    alias = runner.invoke(app, ["kafka-topics.sh", "--help"])
    assert alias.exit_code == 0 and alias.stdout == shown.stdout
    assert set(kafka_tools.TOOLS) == {
        "kafka-topics",
        "kafka-configs",
        "kafka-console-producer",
        "kafka-console-consumer",
        "kafka-consumer-groups",
        "kafka-dump-log",
        "kafka-acls",
        # issue 28's added tools (tests/cli/test_kafka_added_tools.py)
        "kafka-get-offsets",
        "kafka-delete-records",
        "kafka-log-dirs",
        "kafka-leader-election",
        "kafka-transactions",
        "kafka-producer-perf-test",
        "kafka-consumer-perf-test",
    }


@dataclass
class Msg:
    key_: bytes | None
    value_: bytes | None
    headers_: list[tuple[str, bytes | None]] = field(default_factory=list)

    def key(self) -> bytes | None:
        return self.key_

    def value(self) -> bytes | None:
        return self.value_

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self.headers_ or None

    def timestamp(self) -> tuple[int, int]:
        return (1, 1700000000000)

    def partition(self) -> int:
        return 3

    def offset(self) -> int:
        return 42

    def leader_epoch(self) -> int | None:
        return None


def test_default_message_formatter_lines() -> None:
    value_only = KafkaMessageFormatter.configure({})
    assert value_only.render(Msg(b"k", b"v")) == b"v\n"
    assert value_only.render(Msg(b"k", None)) == b"null\n"  # a tombstone
    assert value_only.render(Msg(b"k", b"")) == b"\n"  # an empty value
    keyed = KafkaMessageFormatter.configure({"print.key": "true", "key.separator": ":"})
    assert keyed.render(Msg(b"user_id_99", None)) == b"user_id_99:null\n"
    everything = KafkaMessageFormatter.configure(
        {
            "print.timestamp": "true",
            "print.partition": "true",
            "print.offset": "true",
            "print.headers": "true",
            "print.key": "true",
            "null.literal": "<tombstone>",
        }
    )
    assert everything.render(Msg(b"k", None, [("h", b"x"), ("n", None)])) == (
        b"CreateTime:1700000000000\tPartition:3\tOffset:42\th:x,n:<tombstone>\tk\t<tombstone>\n"
    )
    assert everything.render(Msg(None, b"v")) == (
        b"CreateTime:1700000000000\tPartition:3\tOffset:42\tNO_HEADERS\t<tombstone>\tv\n"
    )
    key_only = KafkaMessageFormatter.configure({"print.key": "true", "print.value": "false"})
    assert key_only.render(Msg(b"k", b"v")) == b"k\n"
    with pytest.raises(CliUsageError, match="expects true or false"):
        KafkaMessageFormatter.configure({"print.key": "yes please"})


def test_the_brokers_layer_goes_back_in_front_of_the_default_one() -> None:
    """confluent-kafka keys a config's synonyms by name, so ``STATIC_BROKER_CONFIG:log.cleanup.policy
    =compact`` and ``DEFAULT_CONFIG:log.cleanup.policy=delete`` arrive as the default one only."""
    collapsed = [
        {"name": "cleanup.policy", "value": "compact", "source": "DYNAMIC_TOPIC_CONFIG"},
        {"name": "log.cleanup.policy", "value": "delete", "source": "DEFAULT_CONFIG"},
    ]
    broker = {"log.cleanup.policy": ("STATIC_BROKER_CONFIG", "compact")}
    assert topic_cmd.restore_broker_layer(collapsed, broker) == [
        collapsed[0],
        {"name": "log.cleanup.policy", "value": "compact", "source": "STATIC_BROKER_CONFIG"},
        collapsed[1],
    ]
    # A broker at its defaults has nothing to put back; nor has a name the broker does not set.
    assert topic_cmd.restore_broker_layer(collapsed, {}) == collapsed
    unrelated = {"log.retention.ms": ("STATIC_BROKER_CONFIG", "1")}
    assert topic_cmd.restore_broker_layer(collapsed, unrelated) == collapsed


def test_topic_describe_shows_the_broker_layer_of_each_synonym(tmp_path: Path) -> None:
    """``kompakt topic describe -o json`` (not only the Kafka-spelled tools) puts back the broker's
    layer that confluent-kafka drops: a broker started with ``log.cleanup.policy=compact``."""
    from kompakt.testing.broker import InProcessBroker
    from tests.support.cli import run

    with InProcessBroker(tmp_path / "data", overrides={"log.cleanup.policy": "compact"}) as broker:
        assert run(broker.bootstrap_servers, "topic", "create", "inherits").code == 0
        described = run(broker.bootstrap_servers, "topic", "describe", "inherits", "-o", "json")
        assert described.code == 0, described.stderr
        [policy] = [c for c in json.loads(described.stdout)["configs"] if c["name"] == "cleanup.policy"]
        assert policy["value"] == "compact"
        assert policy["synonyms"] == [
            {"name": "log.cleanup.policy", "value": "compact", "source": "STATIC_BROKER_CONFIG"},
            {"name": "log.cleanup.policy", "value": "delete", "source": "DEFAULT_CONFIG"},
        ]


def test_topic_ids_print_url_safe_as_kafka_and_partition_metadata_do() -> None:
    """confluent-kafka's ``str(Uuid)`` is standard base64 (``db//qHyo...``); Kafka's
    ``Uuid.toString()`` and ``partition.metadata`` use the URL-safe form (``db__qHyo...``)."""
    from confluent_kafka import Uuid

    from kompakt.log.metadata_files import uuid_to_kafka

    raw = bytes.fromhex("75bfffa87ca8a4bb0fbfffa87ca8a4bb")
    most, least = (int.from_bytes(raw[i : i + 8], "big", signed=True) for i in (0, 8))
    assert str(Uuid(most, least)) == "db//qHyopLsPv/+ofKikuw"
    assert kafka_tools.kafka_uuid(Uuid(most, least)) == "db__qHyopLsPv_-ofKikuw"
    import uuid

    assert kafka_tools.kafka_uuid(Uuid(most, least)) == uuid_to_kafka(uuid.UUID(bytes=raw))


def test_group_tables_widen_as_kafkas_printf_columns() -> None:
    """ConsumerGroupCommand's ``%-Ns`` columns grow with the longest value; a member with a
    group instance id adds Kafka's GROUP-INSTANCE-ID column."""
    from kompakt.cli import kafka_format as kf

    long_topic = "a-topic-name-longer-than-fifteen"
    rows = [kf.OffsetRow("g", long_topic, 0, 3, 5, "-", "-", "-")]
    table = kf.offsets_table(rows, verbose=False)
    header, row = table.splitlines()[1:]
    assert header.index("PARTITION") == row.index("0 ") == 16 + len(long_topic) + 1
    assert row.split()[3:6] == ["3", "5", "2"]  # offset, end, lag
    member = kf.Member(
        "g", "c-1", "/10.0.0.1", "c", group_instance_id="static-1", assignment=[("t", 1), ("t", 0)]
    )
    members = kf.members_table("g", [member], verbose=True)
    assert "GROUP-INSTANCE-ID" in members and "static-1" in members and "t:0,1" in members
    assert kf.reset_table([]) == "\n"
    assert kf.delete_groups_result(["a"], [("b", kf.java_error("GROUP_ID_NOT_FOUND"))]) == (
        "\nError: Deletion of some consumer groups failed:\n"
        "* Group 'b' could not be deleted due to: org.apache.kafka.common.errors.GroupIdNotFoundException: "
        "The group id does not exist.\n"
        "\nThese consumer groups were deleted successfully: 'a'\n"
    )
