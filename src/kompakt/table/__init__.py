"""A compacted topic as a table: the latest value per key, straight from the log.

``index`` and ``kernels`` hold the key index (key digest -> offset of the latest record);
``records`` turns batches into record columns and rows; ``build`` fills an index with
read_committed semantics; ``partition`` answers lookups, scans, counts and ``--as-of`` for a live
log, ``offline`` for a log directory on disk (kompakt's or Apache Kafka's); ``store`` keeps the
live tables of a running broker; ``export``, ``diff`` and ``partitioner`` serve the CLI and the
admin endpoint. Layering: above ``log``, ``cleaner`` and ``broker`` (it reads logs and uses the
cleaner's kernels), below ``server`` and ``cli``.
"""
