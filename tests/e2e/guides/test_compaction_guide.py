# ruff: noqa: E501  (guide lines are kept whole, as printed)
"""The compaction guides' commands, typed as printed, through kompakt's Kafka-spelled tools (issue 17).

The seed documents (Kafka's log compaction guides, KIP-354, and the backup guide) are not in the
repository, so the lines here are the ones the issues quote from them word for word (issue 8:
``--config log.cleaner.min.cleanable.ratio=0.3``, ``--add-config
log.cleaner.min.compaction.lag.ms=3600000``, the console producer's ``null.marker=TOMBS`` and
``user_id_99:TOMBS``; issue 17: ``kafka-topics.sh --bootstrap-server localhost:9092 --create
--topic user-profiles --config cleanup.policy=compact``, ``kafka-configs.sh --entity-type topics
--entity-name X --alter --add-config``, ``--property print.key=true``, ``--from-beginning``, the
broker's ``log.cleanup.policy=compact`` and ``log.cleaner.io.max.bytes.per.second=15728640``) and
the examples of Kafka 4.1's own documentation (``docs/getting-started/quickstart.md``,
``docs/configuration/topic-configs.md`` and ``broker-configs.md``,
``docs/operations/basic-kafka-operations.md``). Host and paths aside, each line runs exactly as
printed; a console consumer that the guide stops with Ctrl-C gets ``--max-messages`` or
``--timeout-ms`` here.

The broker is ``kompakt serve --config server.properties`` with the guide's broker settings.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.serve import BrokerProcess, start_broker

from .runner import GuideRunner, lines_of

pytestmark = pytest.mark.clients

GUIDE_SERVER_PROPERTIES = """\
# the guide's broker settings
log.cleanup.policy=compact
log.cleaner.io.max.bytes.per.second=15728640
log.cleaner.threads=1
log.cleaner.dedupe.buffer.size=134217728
"""

USER_PROFILES = """\
$ kafka-topics.sh --bootstrap-server localhost:9092 --create --topic user-profiles --config cleanup.policy=compact
"""
PRODUCE_PROFILES = """\
$ kafka-console-producer.sh --bootstrap-server localhost:9092 --topic user-profiles \\
    --property parse.key=true --property key.separator=: --property null.marker=TOMBS
"""
PROFILE_LINES = "user_id_99:Jane\nuser_id_98:Bob\nuser_id_99:Jane Doe\nuser_id_97:\nuser_id_99:TOMBS\n"
CONSUME_PROFILES = """\
$ kafka-console-consumer.sh --bootstrap-server localhost:9092 --topic user-profiles --from-beginning \\
    --property print.key=true --property key.separator=: --max-messages {n}
"""


@pytest.fixture(scope="module")
def guide_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Path]]:
    root = tmp_path_factory.mktemp("compaction-guide")
    properties = root / "server.properties"
    properties.write_text(GUIDE_SERVER_PROPERTIES)
    process = start_broker(root / "data", "--config", str(properties))
    yield process, properties
    assert process.stop() == 0, process.stderr_path.read_text()


@pytest.fixture
def guide(
    guide_broker: tuple[BrokerProcess, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> GuideRunner:
    broker, properties = guide_broker
    runner = GuideRunner(capsys, monkeypatch)
    runner.replacements = {
        "localhost:9092": broker.bootstrap,
        "/tmp/kafka-logs": str(broker.data_dir),
        "config/server.properties": str(properties),
    }
    runner.env = {"KOMPAKT_BOOTSTRAP": broker.bootstrap}
    return runner


def admin_url(broker: BrokerProcess) -> str:
    match = re.search(r"admin (http://\S+)", broker.ready_line)
    assert match, broker.ready_line
    return match.group(1)


def test_the_user_profiles_walkthrough(guide: GuideRunner, guide_broker: tuple[BrokerProcess, Path]) -> None:
    broker, properties = guide_broker
    [create] = lines_of(USER_PROFILES)
    assert guide.ok(create).out == "Created topic user-profiles.\n"

    [produce] = lines_of(PRODUCE_PROFILES)
    assert guide.ok(produce, stdin=PROFILE_LINES).code == 0

    [consume] = lines_of(CONSUME_PROFILES.format(n=5))
    shown = guide.ok(consume)
    # A tombstone prints as Kafka's null literal; an empty value prints as nothing.
    assert shown.out == "user_id_99:Jane\nuser_id_98:Bob\nuser_id_99:Jane Doe\nuser_id_97:\nuser_id_99:null\n"
    assert "Processed a total of 5 messages" in shown.err

    # The guide then lets the cleaner run; here kompakt's admin commands roll and clean now.
    url = admin_url(broker)
    guide.ok(f"kompakt admin roll user-profiles --admin-url {url}")
    guide.ok(f"kompakt admin compact user-profiles --admin-url {url}")
    [consume] = lines_of(CONSUME_PROFILES.format(n=3))
    assert guide.ok(consume).out == "user_id_98:Bob\nuser_id_97:\nuser_id_99:null\n"

    # explain on the directory, offline, with the broker's file: the verdict is compaction's.
    explained = guide.ok(
        f"kompakt log explain {broker.data_dir}/user-profiles-0 --server-properties config/server.properties"
    )
    assert "cleanup.policy is delete" not in explained.out
    describe = guide.ok(
        "kafka-configs.sh --bootstrap-server localhost:9092 --entity-type topics --entity-name user-profiles --describe"
    )
    # Kafka's full synonym chain: the broker's server.properties layer is not lost to the default.
    assert (
        "  cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact, "
        "STATIC_BROKER_CONFIG:log.cleanup.policy=compact, DEFAULT_CONFIG:log.cleanup.policy=delete}\n"
        in describe.out
    )
    del properties


def test_broker_names_at_topic_level_are_refused_with_the_topic_name(guide: GuideRunner) -> None:
    ran = guide.run(
        "kafka-topics.sh --bootstrap-server localhost:9092 --create --topic user-profiles-tuned "
        "--config cleanup.policy=compact --config log.cleaner.min.cleanable.ratio=0.3"
    )
    assert ran.code == 1
    # TopicCommand's failure line, on stdout as Kafka prints it
    assert ran.out.startswith("Error while executing topic command : ")
    assert "did you mean min.cleanable.dirty.ratio?" in ran.out
    guide.ok("kafka-topics.sh --bootstrap-server localhost:9092 --create --topic guide-x")
    # As the issue quotes it: no --bootstrap-server (kompakt takes $KOMPAKT_BOOTSTRAP).
    ran = guide.run(
        "kafka-configs.sh --entity-type topics --entity-name guide-x --alter "
        "--add-config log.cleaner.min.compaction.lag.ms=3600000"
    )
    assert ran.code == 1
    assert "did you mean min.compaction.lag.ms?" in ran.err
    guide.ok(
        "kafka-configs.sh --entity-type topics --entity-name guide-x --alter --add-config min.compaction.lag.ms=3600000"
    )
    # KIP-354's bound, by its topic-level name.
    guide.ok(
        "kafka-configs.sh --bootstrap-server localhost:9092 --entity-type topics --entity-name guide-x "
        "--alter --add-config max.compaction.lag.ms=86400000"
    )
    described = guide.ok(
        "kafka-configs.sh --bootstrap-server localhost:9092 --entity-type topics --entity-name guide-x --describe"
    )
    assert "  min.compaction.lag.ms=3600000 " in described.out
    assert "  max.compaction.lag.ms=86400000 " in described.out


def test_a_topic_without_a_policy_takes_the_brokers_log_cleanup_policy(
    guide: GuideRunner, guide_broker: tuple[BrokerProcess, Path]
) -> None:
    broker, _properties = guide_broker
    guide.ok("bin/kafka-topics.sh --create --topic quickstart-events --bootstrap-server localhost:9092")
    described = guide.ok(
        "bin/kafka-topics.sh --describe --topic quickstart-events --bootstrap-server localhost:9092"
    )
    assert described.out.startswith("Topic: quickstart-events\tTopicId: ")
    # TopicCommand lists every config not at its default: the broker's static log.cleanup.policy
    assert "\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: cleanup.policy=compact\n" in described.out
    assert "\tTopic: quickstart-events\tPartition: 0\tLeader: " in described.out
    # Null keys on a topic the broker compacts by default: Kafka refuses them too
    # (INVALID_RECORD); the producer reports it and writes nothing.
    refused = guide.run(
        "bin/kafka-console-producer.sh --topic quickstart-events --bootstrap-server localhost:9092",
        stdin="This is my first event\nThis is my second event\n",
    )
    assert refused.code == 1
    assert (
        "INVALID_RECORD" in refused.err
        and "records with a null key are refused by a compacted topic" in refused.err
    )
    consumed = guide.ok(
        "bin/kafka-console-consumer.sh --topic quickstart-events --from-beginning --bootstrap-server localhost:9092 --timeout-ms 500"
    )
    assert consumed.out == ""
    for line in (
        f"kompakt log explain {broker.data_dir}/quickstart-events-0 --server-properties config/server.properties",
        f"kompakt log explain {broker.data_dir}/quickstart-events-0 --bootstrap localhost:9092",
    ):
        explained = guide.ok(line + " --output json")
        assert '"verdict": "not compacting: cleanup.policy is delete"' not in explained.out
        assert '"value": "compact"' in explained.out


def test_kafkas_topic_config_examples(guide: GuideRunner) -> None:
    """docs/configuration/topic-configs.md, every command of it."""
    guide.ok(
        "$ bin/kafka-topics.sh --bootstrap-server localhost:9092 --create --topic my-topic --partitions 1 "
        "--replication-factor 1 --config max.message.bytes=64000 --config flush.messages=1"
    )
    guide.ok(
        "$ bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type topics --entity-name my-topic "
        "--alter --add-config max.message.bytes=128000"
    )
    described = guide.ok(
        "$ bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type topics --entity-name my-topic --describe"
    )
    assert described.out.splitlines()[0] == "Dynamic configs for topic my-topic are:"
    assert (
        "  max.message.bytes=128000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:max.message.bytes=128000"
        in described.out
    )
    assert "  flush.messages=1 " in described.out
    guide.ok(
        "$ bin/kafka-configs.sh --bootstrap-server localhost:9092  --entity-type topics --entity-name my-topic "
        "--alter --delete-config max.message.bytes"
    )
    described = guide.ok(
        "$ bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type topics --entity-name my-topic --describe"
    )
    assert "max.message.bytes" not in described.out
    # docs/operations/basic-kafka-operations.md: more partitions, then delete.
    guide.ok(
        "$ bin/kafka-topics.sh --bootstrap-server localhost:9092 --alter --topic my-topic --partitions 4"
    )
    assert (
        "PartitionCount: 4"
        in guide.ok("bin/kafka-topics.sh --bootstrap-server localhost:9092 --topic my-topic --describe").out
    )
    guide.ok("$ bin/kafka-topics.sh --bootstrap-server localhost:9092 --delete --topic my-topic")
    assert "my-topic\n" not in guide.ok("kafka-topics.sh --bootstrap-server localhost:9092 --list").out


def test_kafkas_broker_config_examples(guide: GuideRunner) -> None:
    """docs/configuration/broker-configs.md's dynamic cleaner config, and the guide's throttle."""
    guide.ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type brokers --entity-name 0 "
        "--alter --add-config log.cleaner.threads=2"
    )
    described = guide.ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type brokers --entity-name 0 --describe"
    )
    assert (
        "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2, "
        "DEFAULT_CONFIG:log.cleaner.threads=1}\n" in described.out
    )
    guide.ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type brokers --entity-name 0 "
        "--alter --delete-config log.cleaner.threads"
    )
    ran = guide.ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type brokers --entity-default "
        "--alter --add-config log.cleaner.io.max.bytes.per.second=15728640"
    )
    assert ran.out == "Completed updating default config for brokers in the cluster.\n"
    described = guide.ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type brokers --entity-default --describe"
    )
    assert "  log.cleaner.io.max.bytes.per.second=1.572864E7 " in described.out or (
        "  log.cleaner.io.max.bytes.per.second=15728640" in described.out
    )
    guide.ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type brokers --entity-default "
        "--alter --delete-config log.cleaner.io.max.bytes.per.second"
    )


def test_kafkas_consumer_group_and_dump_log_examples(
    guide: GuideRunner, guide_broker: tuple[BrokerProcess, Path]
) -> None:
    guide.ok(
        "kafka-topics.sh --bootstrap-server localhost:9092 --create --topic topic1 --config cleanup.policy=delete"
    )
    guide.ok(
        "kafka-console-producer.sh --bootstrap-server localhost:9092 --topic topic1",
        stdin="one\ntwo\nthree\n",
    )
    consumed = guide.ok(
        "kafka-console-consumer.sh --bootstrap-server localhost:9092 --topic topic1 --group my-group "
        "--from-beginning --max-messages 3"
    )
    assert consumed.out == "one\ntwo\nthree\n"
    assert "my-group" in guide.ok("bin/kafka-consumer-groups.sh --bootstrap-server localhost:9092 --list").out
    described = guide.ok(
        "bin/kafka-consumer-groups.sh --bootstrap-server localhost:9092 --describe --group my-group"
    )
    assert "topic1" in described.out
    views = {}
    for view in ("--members", "--members --verbose", "--state", "--offsets"):
        ran = guide.ok(
            f"bin/kafka-consumer-groups.sh --bootstrap-server localhost:9092 --describe --group my-group {view}"
        )
        views[view] = ran.out
        # Each view prints what Kafka's ConsumerGroupCommand prints for it (the consumer has left).
        assert "Consumer group 'my-group' has no active members." in ran.err
    assert views["--members"].startswith("\nGROUP           CONSUMER-ID     HOST            CLIENT-ID")
    assert "STATE" in views["--state"] and "Empty" in views["--state"] and "topic1" not in views["--state"]
    assert "topic1" in views["--offsets"] and "LAG" in views["--offsets"]
    assert views["--offsets"] == described.out  # the default view is the offsets table
    plan = guide.ok(
        "bin/kafka-consumer-groups.sh --bootstrap-server localhost:9092 --reset-offsets --group my-group "
        "--topic topic1 --to-latest"
    )
    assert "topic1" in plan.out
    guide.ok("bin/kafka-consumer-groups.sh --bootstrap-server localhost:9092 --delete --group my-group")
    assert (
        "my-group"
        not in guide.ok("bin/kafka-consumer-groups.sh --bootstrap-server localhost:9092 --list").out
    )
    dumped = guide.ok(
        "bin/kafka-dump-log.sh --files /tmp/kafka-logs/topic1-0/00000000000000000000.log --print-data-log --output json"
    )
    assert '"value": "three"' in dumped.out
