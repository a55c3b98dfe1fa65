"""The server's own configs (Kafka's ``ServerConfigs``, ``SocketServerConfigs`` and the node
identity of ``KRaftConfigs``): node id, request and response sizes, topic creation.
"""

from __future__ import annotations

from kompakt.config.defs import BOOL, INT, ConfigDef, Lookup, Range, define
from kompakt.errors import ConfigError

SERVER_BROKER_DEFS: tuple[ConfigDef, ...] = (
    define("num.partitions", INT, 1, "Partitions of an auto-created topic.", Range(1), dynamic=False),
    define("default.replication.factor", INT, 1, "Replication factor of an auto-created topic.",
           dynamic=False),
    define("auto.create.topics.enable", BOOL, True, "Create unknown topics on metadata/produce requests.",
           dynamic=False),
    define("delete.topic.enable", BOOL, True, "Allow DeleteTopics.", dynamic=False),
    define("node.id", INT, 0, "This broker's node id.", Range(0), dynamic=False),
    define("broker.id", INT, None, "Older name of node.id; must match it when both are set.",
           dynamic=False),
    define("socket.request.max.bytes", INT, 104_857_600, "Largest request size in bytes.", Range(1),
           dynamic=False),
    define("fetch.max.bytes", INT, 57_671_680, "Largest Fetch response in bytes (smaller of this and the "
           "request's max_bytes; the first batch is still returned whole).", Range(0), dynamic=False),
)  # fmt: skip


def check_server_rules(config: Lookup) -> None:
    """``node.id`` and its older name must agree when both are set (Kafka's ``KafkaConfig``)."""
    node_id, broker_id = config.lookup_set("node.id"), config.lookup_set("broker.id")
    if node_id is not None and broker_id is not None and node_id[0] != broker_id[0]:
        raise ConfigError(f"If node.id ({node_id[0]}) is set, broker.id ({broker_id[0]}) must match it")
