"""The server's own configs (Kafka's ``ServerConfigs``, ``SocketServerConfigs`` and the node
identity of ``KRaftConfigs``): node id, request and response sizes, topic creation; and kompakt's
admin HTTP endpoint (``admin.*``: which Host names it answers, its bearer token, its TLS
certificate in Kafka's PEM form; see ``kompakt.server.admin_access``). Listeners and TLS are in
:mod:`kompakt.config.listener_defs`.
"""

from __future__ import annotations

from kompakt.config.defs import BOOL, INT, STR, ConfigDef, ConfigType, Lookup, Range, ValidString, define
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

PASSWORD = ConfigType.PASSWORD
LIST = ConfigType.LIST

#: The admin HTTP endpoint (kompakt's own: Kafka has none). Static: the endpoint reads them at start.
ADMIN_BROKER_DEFS: tuple[ConfigDef, ...] = (
    define("admin.allowed.hosts", LIST, (), "Host names the admin endpoint answers besides localhost, "
           "127.0.0.1, [::1] and its bound address (any IP address too when bound to a wildcard); a "
           "request with another Host header is refused, as a DNS-rebinding page sends. * allows any.",
           dynamic=False),
    define("admin.auth.token", PASSWORD, None, "Bearer token the admin endpoint requires for everything "
           "but /healthz (and the static page at /). Required when the endpoint is bound beyond "
           "loopback; when set it is required on loopback too.", dynamic=False),
    define("admin.auth.token.file", STR, None, "A file holding the admin endpoint's bearer token (its "
           "first line), instead of admin.auth.token.", dynamic=False),
    define("admin.ssl.keystore.type", STR, "PEM", "Format of the admin endpoint's key store; PEM only, "
           "as Kafka's ssl.keystore.type=PEM.", ValidString(("PEM",)), dynamic=False),
    define("admin.ssl.keystore.location", STR, None, "A PEM file with the admin endpoint's private key and "
           "certificate chain: the endpoint then speaks HTTPS only.", dynamic=False),
    define("admin.ssl.keystore.certificate.chain", PASSWORD, None, "The admin endpoint's certificate chain "
           "in PEM, inline (with admin.ssl.keystore.key, instead of admin.ssl.keystore.location).",
           dynamic=False),
    define("admin.ssl.keystore.key", PASSWORD, None, "The admin endpoint's private key in PEM, inline.",
           dynamic=False),
    define("admin.ssl.key.password", PASSWORD, None, "Password of an encrypted admin endpoint private key.",
           dynamic=False),
)  # fmt: skip


def check_server_rules(config: Lookup) -> None:
    """``node.id`` and its older name must agree when both are set (Kafka's ``KafkaConfig``)."""
    node_id, broker_id = config.lookup_set("node.id"), config.lookup_set("broker.id")
    if node_id is not None and broker_id is not None and node_id[0] != broker_id[0]:
        raise ConfigError(f"If node.id ({node_id[0]}) is set, broker.id ({broker_id[0]}) must match it")
