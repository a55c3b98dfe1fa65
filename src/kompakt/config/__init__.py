"""kompakt.config: every config the broker, the storage and the tools read, in one place.

Below ``log`` (an import contract keeps it there): the storage, the cleaner, the broker and the
tools all read configs, so their definitions cannot live in any one of them. Split by owner, as
Kafka keeps definition, default and rules together per owner and merges them in ``KafkaConfig``:

* ``defs`` — the machinery (Kafka's ``ConfigDef`` in miniature): types, parsing, validators, Java's
  formatting, ``.properties`` files, and Java's type bounds (``LONG_MAX``...);
* ``log_defs``, ``group_defs``, ``txn_defs``, ``server_defs`` — each owner's definitions, defaults
  and cross-field rules (``group_defs`` also the configs of one group, a GROUP resource);
  ``kafka`` with ``kafka_broker_configs.json`` — every other Kafka 4.1 broker config, accepted and
  inert; ``tables`` — all of them merged, and the defaults typed settings read;
* ``broker`` — :class:`~kompakt.config.broker.BrokerConfig` (three layers; building one runs every
  owner's rules, so a bad configuration is refused before anything is opened); ``topic`` — a
  topic's per-key resolution (the typed view is the storage's ``kompakt.log.config.LogConfig``);
  ``groups`` — every group's own configs;
* ``describe`` (DescribeConfigs views), ``doc`` (the README's tables), ``dynamic`` (the dynamic
  configs a broker persists in its data directory).

The typed settings each owner runs with stay with their owner and are built by one
``from_broker(config)`` each (``CleanerSettings``, ``GroupConfig``, ``ConsumerGroupConfig``,
``TxnConfig``, the server's ``ServerSettings``). Every error is a :class:`~kompakt.errors.ConfigError`.
"""
