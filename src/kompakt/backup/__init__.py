"""kompakt.backup: backups of topics from any Kafka-compatible cluster, and their restores.

A backup is a copy of each partition's log as the source still had it: records kept as Kafka
RecordBatch v2 at their original offsets, with the offsets the source no longer had recorded as
gaps, plus topic configs and consumer-group offsets. The storage format is specified in
``docs/backup-format.md``. Modules:

* :mod:`~kompakt.backup.config`: the YAML files (``backup.yaml``, ``restore.yaml``);
* :mod:`~kompakt.backup.storage`: filesystem and S3 backends with atomic writes;
* :mod:`~kompakt.backup.manifest`: the versioned manifest;
* :mod:`~kompakt.backup.segment`: backup segment files (building and verifying batches);
* :mod:`~kompakt.backup.batches`: a Fetch answer's batches made into backup batches, and backup
  batches made into Produce batches, without decoding records;
* :mod:`~kompakt.backup.wire`: the data path's Fetch and Produce over kompakt's own connection;
* :mod:`~kompakt.backup.backup`: copying from a cluster (snapshot, continuous, incremental);
* :mod:`~kompakt.backup.restore`: the protocol restore and its dry run;
* :mod:`~kompakt.backup.offline`: the exact restore into a stopped data directory;
* :mod:`~kompakt.backup.erasure`: the key erasure filter and the time window.
"""
