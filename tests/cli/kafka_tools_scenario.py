"""One scenario, run twice: by ``tools/capture_kafka_tools.py`` with Kafka 4.1.2's own tools against
a real Kafka broker (the outputs are committed under ``fixtures/kafka_tools_4.1.2``), and by
``test_kafka_tools_fixtures.py`` with ``kompakt kafka-*`` against ``kompakt serve``.

Both brokers run with ``node.id=1`` on 127.0.0.1, so the outputs can be compared byte for byte
after :func:`normalise`, which replaces only what differs per run whatever the broker: the
listener port, topic ids, member ids' random suffixes and the timestamps of Kafka's log4j lines.
``kafka-dump-log`` reads segment files captured from the real broker (``segments/``), so both
tools dump the same bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "kafka_tools_4.1.2"
BROKER_ID = "1"
MEMBER_CLIENT_ID = "worker-1"


@dataclass(frozen=True)
class Step:
    """One command of the scenario.

    ``kind`` is ``run`` (a tool's command line), ``start-member`` / ``stop-member`` (a console
    consumer of ``orders`` from the beginning in group ``args[0]`` that stays in the group
    between the two), ``wait-stable`` (poll until group ``args[0]``'s member holds a committed
    offset: Kafka's Java consumer commits its position even before it has records, librdkafka
    only after, so the member reads from the beginning and both commit the end), ``snapshot``
    (capture only: copy the partition ``args[0]``'s first segment into ``segments/``;
    ``args[1]``, if given, keeps only the batches within that many bytes)."""

    name: str
    tool: str = ""
    args: tuple[str, ...] = ()
    stdin: str | None = None
    kind: str = "run"
    compare_stderr: bool = False
    bootstrap: bool = True
    notes: str = ""
    extra: dict[str, str] = field(default_factory=dict)


ORDERS_LINES = "alice:1\nbob:2\nalice:3\ncarol:\nbob:NULL\n"
HEADER_LINES = "trace:t1,kind:order\tdave:5\n"

STEPS: tuple[Step, ...] = (
    # ---------------------------------------------------------------- kafka-topics
    Step(
        "topics-create",
        "kafka-topics",
        (
            "--create",
            "--topic",
            "orders",
            "--config",
            "cleanup.policy=compact",
            "--config",
            "min.cleanable.dirty.ratio=0.01",
        ),
    ),
    Step("topics-create-exists", "kafka-topics", ("--create", "--topic", "orders")),
    Step(
        "topics-create-wide",
        "kafka-topics",
        ("--create", "--topic", "wide", "--partitions", "3", "--replication-factor", "1"),
    ),
    Step(
        "topics-create-bad-config",
        "kafka-topics",
        ("--create", "--topic", "bad", "--config", "segment.bytes=16384"),
    ),
    Step("topics-list", "kafka-topics", ("--list",)),
    Step("topics-describe-orders", "kafka-topics", ("--describe", "--topic", "orders")),
    Step("topics-alter-partitions", "kafka-topics", ("--alter", "--topic", "wide", "--partitions", "4")),
    Step("topics-describe-wide", "kafka-topics", ("--describe", "--topic", "wide")),
    Step("topics-describe-missing", "kafka-topics", ("--describe", "--topic", "nope")),
    Step("topics-delete", "kafka-topics", ("--delete", "--topic", "wide")),
    Step("topics-delete-missing", "kafka-topics", ("--delete", "--topic", "nope")),
    # ---------------------------------------------------------------- kafka-configs
    Step(
        "configs-alter-topic",
        "kafka-configs",
        (
            "--entity-type",
            "topics",
            "--entity-name",
            "orders",
            "--alter",
            "--add-config",
            "segment.ms=600000,retention.ms=-1",
        ),
    ),
    Step(
        "configs-delete-topic-config",
        "kafka-configs",
        ("--entity-type", "topics", "--entity-name", "orders", "--alter", "--delete-config", "retention.ms"),
    ),
    Step(
        "configs-describe-topic",
        "kafka-configs",
        ("--entity-type", "topics", "--entity-name", "orders", "--describe"),
    ),
    Step("configs-describe-topics", "kafka-configs", ("--entity-type", "topics", "--describe")),
    Step(
        "configs-describe-topic-all",
        "kafka-configs",
        ("--entity-type", "topics", "--entity-name", "orders", "--describe", "--all"),
    ),
    Step(
        "configs-describe-missing-topic",
        "kafka-configs",
        ("--entity-type", "topics", "--entity-name", "nope", "--describe"),
    ),
    Step(
        "configs-describe-broker",
        "kafka-configs",
        ("--entity-type", "brokers", "--entity-name", BROKER_ID, "--describe"),
    ),
    Step(
        "configs-alter-broker",
        "kafka-configs",
        (
            "--entity-type",
            "brokers",
            "--entity-name",
            BROKER_ID,
            "--alter",
            "--add-config",
            "log.cleaner.threads=2",
        ),
    ),
    Step(
        "configs-alter-broker-default",
        "kafka-configs",
        (
            "--entity-type",
            "brokers",
            "--entity-default",
            "--alter",
            "--add-config",
            "log.cleaner.backoff.ms=2000",
        ),
    ),
    Step(
        "configs-describe-broker-dynamic",
        "kafka-configs",
        ("--entity-type", "brokers", "--entity-name", BROKER_ID, "--describe"),
    ),
    Step(
        "configs-describe-broker-all",
        "kafka-configs",
        ("--entity-type", "brokers", "--entity-name", BROKER_ID, "--describe", "--all"),
    ),
    # ---------------------------------------------------------------- console producer / consumer
    Step(
        "console-producer",
        "kafka-console-producer",
        (
            "--topic",
            "orders",
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
            "--property",
            "null.marker=NULL",
        ),
        stdin=ORDERS_LINES,
        compare_stderr=True,
    ),
    Step(
        "console-producer-headers",
        "kafka-console-producer",
        (
            "--topic",
            "orders",
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
            "--property",
            "parse.headers=true",
            "--compression-codec",
            "gzip",
        ),
        stdin=HEADER_LINES,
        compare_stderr=True,
    ),
    Step("snapshot-orders", kind="snapshot", args=("orders-0",)),
    Step(
        "console-consumer-keys",
        "kafka-console-consumer",
        (
            "--topic",
            "orders",
            "--from-beginning",
            "--max-messages",
            "6",
            "--property",
            "print.key=true",
            "--group",
            "g1",
        ),
        compare_stderr=True,
    ),
    Step(
        "console-consumer-all-fields",
        "kafka-console-consumer",
        (
            "--topic",
            "orders",
            "--from-beginning",
            "--max-messages",
            "6",
            "--property",
            "print.key=true",
            "--property",
            "print.partition=true",
            "--property",
            "print.offset=true",
            "--property",
            "print.headers=true",
            "--property",
            "print.value=true",
            "--group",
            "g0",
        ),
        compare_stderr=True,
    ),
    # ---------------------------------------------------------------- kafka-consumer-groups
    Step("groups-list", "kafka-consumer-groups", ("--list",)),
    Step("groups-list-state", "kafka-consumer-groups", ("--list", "--state")),
    Step("groups-describe-missing", "kafka-consumer-groups", ("--describe", "--group", "nope")),
    Step("groups-describe", "kafka-consumer-groups", ("--describe", "--group", "g1"), compare_stderr=True),
    Step(
        "groups-describe-members",
        "kafka-consumer-groups",
        ("--describe", "--group", "g1", "--members"),
        compare_stderr=True,
    ),
    Step(
        "groups-describe-members-verbose",
        "kafka-consumer-groups",
        ("--describe", "--group", "g1", "--members", "--verbose"),
        compare_stderr=True,
    ),
    Step(
        "groups-describe-state",
        "kafka-consumer-groups",
        ("--describe", "--group", "g1", "--state"),
        compare_stderr=True,
    ),
    Step(
        "groups-describe-state-verbose",
        "kafka-consumer-groups",
        ("--describe", "--group", "g1", "--state", "--verbose"),
        compare_stderr=True,
    ),
    Step("start-member", kind="start-member", args=("g2",)),
    Step("wait-member", kind="wait-stable", args=("g2",)),
    Step(
        "groups-describe-active",
        "kafka-consumer-groups",
        ("--describe", "--group", "g2"),
        compare_stderr=True,
    ),
    Step(
        "groups-describe-active-verbose",
        "kafka-consumer-groups",
        ("--describe", "--group", "g2", "--offsets", "--verbose"),
        compare_stderr=True,
    ),
    Step(
        "groups-describe-active-members",
        "kafka-consumer-groups",
        ("--describe", "--group", "g2", "--members"),
        compare_stderr=True,
    ),
    Step(
        "groups-describe-active-members-verbose",
        "kafka-consumer-groups",
        ("--describe", "--group", "g2", "--members", "--verbose"),
        compare_stderr=True,
    ),
    Step(
        "groups-describe-active-state",
        "kafka-consumer-groups",
        ("--describe", "--group", "g2", "--state"),
        compare_stderr=True,
    ),
    Step("groups-delete-active", "kafka-consumer-groups", ("--delete", "--group", "g2")),
    Step("stop-member", kind="stop-member", args=("g2",)),
    Step(
        "groups-reset-default-dry-run",
        "kafka-consumer-groups",
        ("--reset-offsets", "--group", "g1", "--topic", "orders", "--to-earliest"),
        compare_stderr=True,
    ),
    Step(
        "groups-reset-execute",
        "kafka-consumer-groups",
        ("--reset-offsets", "--group", "g1", "--topic", "orders", "--to-offset", "2", "--execute"),
        compare_stderr=True,
    ),
    Step(
        "groups-reset-dry-run",
        "kafka-consumer-groups",
        ("--reset-offsets", "--group", "g1", "--all-topics", "--to-latest", "--dry-run"),
        compare_stderr=True,
    ),
    Step(
        "groups-describe-after-reset",
        "kafka-consumer-groups",
        ("--describe", "--group", "g1"),
        compare_stderr=True,
    ),
    Step(
        "groups-delete-offsets",
        "kafka-consumer-groups",
        ("--delete-offsets", "--group", "g1", "--topic", "orders"),
    ),
    Step("groups-delete", "kafka-consumer-groups", ("--delete", "--group", "g1")),
    Step("groups-delete-missing", "kafka-consumer-groups", ("--delete", "--group", "g1")),
    Step("groups-list-after-delete", "kafka-consumer-groups", ("--list",)),
    # ---------------------------------------------------------------- kafka-dump-log (captured segments)
    Step("snapshot-metadata", kind="snapshot", args=("__cluster_metadata-0", "4096")),
    Step(
        "dump-log",
        "kafka-dump-log",
        ("--files", "segments/orders-0/00000000000000000000.log"),
        bootstrap=False,
        compare_stderr=True,
    ),
    Step(
        "dump-log-data",
        "kafka-dump-log",
        ("--files", "segments/orders-0/00000000000000000000.log", "--print-data-log"),
        bootstrap=False,
        compare_stderr=True,
    ),
    Step(
        "dump-log-deep",
        "kafka-dump-log",
        ("--files", "segments/orders-0/00000000000000000000.log", "--deep-iteration"),
        bootstrap=False,
        compare_stderr=True,
    ),
    Step(
        "dump-log-metadata",
        "kafka-dump-log",
        ("--files", "segments/__cluster_metadata-0/00000000000000000000.log", "--cluster-metadata-decoder"),
        bootstrap=False,
        compare_stderr=True,
    ),
)


def member_command_line(group: str, bootstrap: str) -> list[str]:
    """The console consumer that stays in ``group`` between ``start-member`` and ``stop-member``."""
    return [
        "--bootstrap-server",
        bootstrap,
        "--topic",
        "orders",
        "--from-beginning",
        "--group",
        group,
        "--consumer-property",
        f"client.id={MEMBER_CLIENT_ID}",
    ]


def member_committed(describe_output: str) -> bool:
    """``kafka-consumer-groups --describe`` shows the member's row with a committed offset."""
    return any(
        MEMBER_CLIENT_ID in line and line.split()[3].isdigit() for line in describe_output.splitlines()
    )


def command_line(step: Step, bootstrap: str) -> list[str]:
    """The tool's arguments, with ``--bootstrap-server`` first as Kafka's docs write it."""
    return (["--bootstrap-server", bootstrap] if step.bootstrap else []) + list(step.args)


_LOG4J = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] ", re.MULTILINE)
_TOPIC_ID = re.compile(r"(TopicId: )[A-Za-z0-9_-]{22}")
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_MEMBER_ID = re.compile(r"(" + re.escape(MEMBER_CLIENT_ID) + r"-)" + _UUID)
_PORT = re.compile(r"(127\.0\.0\.1:)\d{5}")


def normalise(text: str) -> str:
    """Replace what differs per run on any broker, keeping every column width: the listener
    port (both brokers listen on a five-digit port), topic ids (22 URL-safe base64 characters),
    the UUID Kafka's classic protocol appends to a member's client id, and log4j timestamps."""
    text = _LOG4J.sub("[TIMESTAMP] ", text)
    text = _TOPIC_ID.sub(lambda m: m.group(1) + "T" * 22, text)
    text = _MEMBER_ID.sub(lambda m: m.group(1) + "00000000-0000-0000-0000-000000000000", text)
    return _PORT.sub(r"\g<1>PORT0", text)
