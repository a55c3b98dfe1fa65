"""The bounds-checked reader of Kafka's generated messages, for the coordinators' record formats.

It moved to :mod:`kompakt.records.schema_reader` so that the log layer (KRaft's metadata log, read by
the offline tools) reads with the same checks; this name stays for the broker's modules.
"""

from kompakt.records.schema_reader import SchemaReader as SchemaReader

__all__ = ["SchemaReader"]
