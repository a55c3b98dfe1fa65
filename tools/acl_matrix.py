"""The ACL acceptance matrix: one confluent-kafka scenario, each step allowed and denied by ACLs.

Run against a broker with a SASL_PLAINTEXT listener whose PLAIN users are ``admin`` (a super user)
``alice`` and ``bob``, and Kafka's StandardAuthorizer. ``admin`` creates the topics and the ACLs through
the Admin API; ``alice`` then produces, consumes, joins groups and commits, runs transactions,
creates and deletes topics and describes configs, each once where an ACL allows it and once
where none does (or a DENY wins), and the error each step ends with is recorded by name.

Recording on Apache Kafka 4.1.2 (``/work/shared/realkafka``; see ``--kafka-properties`` for the
server.properties lines it needs)::

    KAFKA_BUILD=/work/rk/build /work/shared/realkafka/start.sh /tmp/rk-acl 59310 \\
        $(.venv/bin/python tools/acl_matrix.py --kafka-properties 59312) &
    .venv/bin/python tools/acl_matrix.py --bootstrap 127.0.0.1:59312 \\
        --out tests/e2e/security/fixtures/acl_matrix_kafka_4.1.2.json

``tests/e2e/security/test_acl_matrix.py`` runs the same scenario against ``kompakt serve`` and
compares the codes with the recording.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

ADMIN = ("admin", "admin-secret")
ALICE = ("alice", "alice-secret")
BOB = ("bob", "bob-secret")
JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";'
)
TIMEOUT_S = 20.0
#: How long a consumer waits for a record or an error: long where one is expected (a loaded
#: machine may take seconds to join a group), short where librdkafka reports nothing at all (a
#: topic the consumer may not even see ends as TIMED_OUT, on either broker).
CONSUME_WAIT_S = 30.0
SILENT_WAIT_S = 8.0
OK = "NO_ERROR"


def server_properties(sasl_port: int, plaintext_port: int | None = None) -> list[str]:
    """The server.properties lines of the broker under test: a SASL_PLAINTEXT listener with the
    two PLAIN users, the StandardAuthorizer, ``admin`` a super user (and ``ANONYMOUS``: Kafka's
    own PLAINTEXT/controller listeners)."""
    lines = [
        "sasl.enabled.mechanisms=PLAIN",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:admin;User:ANONYMOUS",
        "allow.everyone.if.no.acl.found=false",
        "auto.create.topics.enable=false",
    ]
    if plaintext_port is not None:  # Apache Kafka: keep start.sh's PLAINTEXT and CONTROLLER listeners
        lines += [
            f"listeners=PLAINTEXT://127.0.0.1:{plaintext_port},CONTROLLER://127.0.0.1:{plaintext_port + 1},"
            f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{plaintext_port},"
            f"CONTROLLER://127.0.0.1:{plaintext_port + 1},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        ]
    return lines


def _config(bootstrap: str, user: tuple[str, str]) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user[0],
        "sasl.password": user[1],
        "socket.timeout.ms": 10_000,
    }


def _name(error: KafkaError | None) -> str:
    return OK if error is None else str(error.name())


def _from(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return _name(exc.args[0])
    return f"EXCEPTION:{type(exc).__name__}"


class _FatalLog(logging.Handler):
    """Keeps the error of librdkafka's ``Fatal error: Broker: <text>:`` line, as Kafka's name."""

    def __init__(self) -> None:
        super().__init__()
        self.error: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        found = re.search(r"Fatal error: Broker: ([^:]+):", record.getMessage())
        if found and self.error is None:
            self.error = found.group(1).strip().rstrip(".").upper().replace(" ", "_")


class Scenario:
    """One run: unique names (so a broker can be reused), the admin client, the steps."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        suffix = uuid.uuid4().hex[:6]
        self.t_ok, self.t_no = f"acl-ok-{suffix}", f"acl-no-{suffix}"
        self.t_mixed, self.t_desc = f"acl-mixed-{suffix}", f"acl-desc-{suffix}"
        self.t_new, self.t_forbidden = f"acl-new-{suffix}", f"acl-forbidden-{suffix}"
        self.g_ok, self.g_no = f"g-ok-{suffix}", f"g-no-{suffix}"
        self.tx_ok, self.tx_no = f"tx-ok-{suffix}", f"tx-no-{suffix}"
        self.admin = AdminClient(_config(bootstrap, ADMIN))
        self.alice_admin = AdminClient(_config(bootstrap, ALICE))
        self.results: dict[str, str] = {}

    # ---- setup (as admin) ------------------------------------------------------------------

    def setup(self) -> None:
        topics = [NewTopic(t, 1, 1) for t in (self.t_ok, self.t_no, self.t_mixed, self.t_desc)]
        for future in self.admin.create_topics(topics, request_timeout=TIMEOUT_S).values():
            future.result(timeout=TIMEOUT_S)
        allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
        literal, prefixed = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
        op = AclOperation
        grants = [
            (ResourceType.TOPIC, self.t_ok, literal, op.WRITE, allow),
            (ResourceType.TOPIC, self.t_ok, literal, op.READ, allow),
            (ResourceType.TOPIC, self.t_ok, literal, op.DESCRIBE_CONFIGS, allow),
            (ResourceType.GROUP, self.g_ok, literal, op.READ, allow),
            (ResourceType.TRANSACTIONAL_ID, self.tx_ok, literal, op.WRITE, allow),
            (ResourceType.TOPIC, self.t_desc, literal, op.DESCRIBE, allow),  # seen, not readable
            (ResourceType.TOPIC, self.t_new, literal, op.CREATE, allow),
            (ResourceType.TOPIC, self.t_new, literal, op.DELETE, allow),
            # Deny beats allow: ALL on the prefix, WRITE denied on the one topic.
            (ResourceType.TOPIC, self.t_mixed[:-2], prefixed, op.ALL, allow),
            (ResourceType.TOPIC, self.t_mixed, literal, op.WRITE, deny),
        ]
        bindings = [AclBinding(r, n, p, "User:alice", "*", o, perm) for r, n, p, o, perm in grants]
        # bob may read (so see) the topic but write nowhere: no idempotent producer (KIP-679).
        bindings.append(AclBinding(ResourceType.TOPIC, self.t_ok, literal, "User:bob", "*", op.READ, allow))
        for future in self.admin.create_acls(bindings, request_timeout=TIMEOUT_S).values():
            future.result(timeout=TIMEOUT_S)
        # Seed a record alice may read.
        producer = Producer(_config(self.bootstrap, ADMIN))
        producer.produce(self.t_ok, key=b"k", value=b"seed")
        producer.produce(self.t_no, key=b"k", value=b"seed")
        producer.produce(self.t_desc, key=b"k", value=b"seed")
        producer.flush(TIMEOUT_S)

    # ---- steps (as alice) ------------------------------------------------------------------

    def step(self, name: str, run: Callable[[], str]) -> None:
        try:
            self.results[name] = run()
        except KafkaException as exc:
            self.results[name] = _from(exc)

    def produce(self, topic: str, *, user: tuple[str, str] = ALICE, idempotent: bool = False) -> str:
        settings = {"message.timeout.ms": 10_000, "enable.idempotence": idempotent}
        if not idempotent:
            settings["retries"] = 0
        # A refused InitProducerId is a fatal error for librdkafka; confluent-kafka's error_cb cannot
        # carry it (SystemError), so it is read from librdkafka's own FATAL log line.
        fatal = _FatalLog()
        logger = logging.getLogger(f"acl_matrix.{uuid.uuid4().hex}")
        logger.addHandler(fatal)
        logger.propagate = False
        producer = Producer({**_config(self.bootstrap, user), **settings, "logger": logger})
        outcome: list[str] = []
        producer.produce(
            topic, key=b"k", value=b"v", on_delivery=lambda err, _msg: outcome.append(_name(err))
        )
        # confluent-kafka raises SystemError from flush after a fatal error (the idempotent producer's).
        with contextlib.suppress(SystemError):
            producer.flush(TIMEOUT_S)
        if fatal.error is not None:
            return f"FATAL:{fatal.error}"
        return outcome[0] if outcome else "TIMED_OUT"

    def consume(self, group: str, topic: str, *, subscribe: bool, wait_s: float = CONSUME_WAIT_S) -> str:
        reported: list[KafkaError] = []
        consumer = Consumer(
            {**_config(self.bootstrap, ALICE), "group.id": group, "auto.offset.reset": "earliest",
             "enable.auto.commit": False, "error_cb": reported.append}
        )  # fmt: skip
        try:
            if subscribe:
                consumer.subscribe([topic])
            else:
                consumer.assign([TopicPartition(topic, 0, 0)])
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    # librdkafka reports some refusals (a topic it may not describe) only here.
                    if reported:
                        return _name(reported[0])
                    continue
                if message.error() is not None:
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    return _name(message.error())
                return OK
            return "TIMED_OUT"
        finally:
            consumer.close()

    def commit(self, group: str, topic: str) -> str:
        consumer = Consumer(
            {**_config(self.bootstrap, ALICE), "group.id": group, "enable.auto.commit": False}
        )
        try:
            result = consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
            errors = [tp.error for tp in result or () if tp.error is not None]
            return _name(errors[0]) if errors else OK
        finally:
            consumer.close()

    def transaction(self, transactional_id: str) -> str:
        producer = Producer({**_config(self.bootstrap, ALICE), "transactional.id": transactional_id})
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        producer.produce(self.t_ok, key=b"tx", value=b"v")
        producer.commit_transaction(TIMEOUT_S)
        return OK

    def create_topic(self, topic: str) -> str:
        future = self.alice_admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=TIMEOUT_S)[topic]
        future.result(timeout=TIMEOUT_S)
        return OK

    def delete_topic(self, topic: str) -> str:
        self.alice_admin.delete_topics([topic], request_timeout=TIMEOUT_S)[topic].result(timeout=TIMEOUT_S)
        return OK

    def describe_configs(self, topic: str) -> str:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        self.alice_admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(
            timeout=TIMEOUT_S
        )
        return OK

    def metadata_visible(self) -> str:
        listed = self.alice_admin.list_topics(timeout=TIMEOUT_S).topics
        ours = (self.t_ok, self.t_no, self.t_mixed, self.t_desc)
        return ",".join(
            label for label, topic in zip(("ok", "no", "mixed", "desc"), ours, strict=True) if topic in listed
        )

    def metadata_named(self, topic: str) -> str:
        found = self.alice_admin.list_topics(topic=topic, timeout=TIMEOUT_S).topics.get(topic)
        return "MISSING" if found is None else _name(found.error)

    def describe_acls(self) -> str:
        selector = AclBindingFilter(
            ResourceType.ANY,
            None,
            ResourcePatternType.ANY,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        # librdkafka hands back an empty list for a refused DescribeAcls: the count is the answer.
        found = self.alice_admin.describe_acls(selector, request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
        return f"{len(found)} ACLs"

    def run(self) -> dict[str, str]:
        self.setup()
        s = self.step
        s("produce.allowed", lambda: self.produce(self.t_ok))
        s("produce.denied", lambda: self.produce(self.t_no))
        s("produce.deny_beats_allow", lambda: self.produce(self.t_mixed))
        s("idempotent_produce.allowed", lambda: self.produce(self.t_ok, idempotent=True))
        s("idempotent_produce.denied", lambda: self.produce(self.t_ok, user=BOB, idempotent=True))
        s("consume.allowed", lambda: self.consume(self.g_ok, self.t_ok, subscribe=False))
        s(
            "consume.hidden_topic",
            lambda: self.consume(self.g_ok, self.t_no, subscribe=False, wait_s=SILENT_WAIT_S),
        )
        s("consume.denied_read", lambda: self.consume(self.g_ok, self.t_desc, subscribe=False))
        s("group_join.allowed", lambda: self.consume(self.g_ok, self.t_ok, subscribe=True))
        s("group_join.denied", lambda: self.consume(self.g_no, self.t_ok, subscribe=True))
        s("commit.allowed", lambda: self.commit(self.g_ok, self.t_ok))
        s("commit.denied_group", lambda: self.commit(self.g_no, self.t_ok))
        s("commit.denied_topic", lambda: self.commit(self.g_ok, self.t_no))
        s("transaction.allowed", lambda: self.transaction(self.tx_ok))
        s("transaction.denied", lambda: self.transaction(self.tx_no))
        s("create_topic.allowed", lambda: self.create_topic(self.t_new))
        s("create_topic.denied", lambda: self.create_topic(self.t_forbidden))
        s("delete_topic.allowed", lambda: self.delete_topic(self.t_new))
        s("delete_topic.denied", lambda: self.delete_topic(self.t_no))
        s("describe_configs.allowed", lambda: self.describe_configs(self.t_ok))
        s("describe_configs.denied", lambda: self.describe_configs(self.t_no))
        s("metadata.all_topics_visible", self.metadata_visible)
        s("metadata.named_denied", lambda: self.metadata_named(self.t_no))
        s("describe_acls.denied", self.describe_acls)
        return self.results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="the SASL_PLAINTEXT listener, HOST:PORT")
    parser.add_argument("--out", help="write the JSON recording here (default: stdout)")
    parser.add_argument(
        "--kafka-properties", type=int, metavar="SASL_PORT",
        help="print the server.properties lines for realkafka/start.sh (PORT = SASL_PORT - 2) and exit",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.kafka_properties is not None:
        for line in server_properties(args.kafka_properties, args.kafka_properties - 2):
            sys.stdout.write(line + "\n")
        return 0
    if not args.bootstrap:
        parser.error("--bootstrap is required")
    results = Scenario(args.bootstrap).run()
    text = json.dumps(results, indent=2, sort_keys=False) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
