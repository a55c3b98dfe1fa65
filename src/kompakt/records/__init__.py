"""Kafka's byte formats: RecordBatch v2, records, varints, compression, control records.

Pure functions over buffers: no files, no logging, no threads.
"""
