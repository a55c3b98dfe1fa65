"""The cleaner's native (numba) kernels; the algorithm in :mod:`kompakt.cleaner` sits on top of them.

* :mod:`~kompakt.cleaner.kernels.hashing`: the 128-bit key digest the offset map stores;
* :mod:`~kompakt.cleaner.kernels.offset_table`: the open-addressing table behind
  :class:`~kompakt.cleaner.offset_map.HashedOffsetMap`, and the fused per-span map and retain
  passes;
* :mod:`~kompakt.cleaner.kernels.rewrite`: re-encoding the records a clean keeps, batch by batch.

They build on the format-level scans and helpers of :mod:`kompakt.records.scan`,
:mod:`kompakt.records.native` and the table layout in :mod:`kompakt.records.layout`. Each module's
public names are its interface; names with a leading underscore are used inside their module
only. This package imports nothing from the rest of the cleaner (an import contract in
``pyproject.toml`` keeps it so), and nothing here is imported at broker start-up.
"""
