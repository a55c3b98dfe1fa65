"""Errors of backup and restore: each one is a single line a user can act on."""

from __future__ import annotations

from kompakt.errors import OperatorError


class BackupError(OperatorError):
    """A backup or restore failed (unreachable cluster, missing topic, storage refused...)."""


class BackupConfigError(BackupError):
    """The YAML configuration is invalid: nothing was read or written."""


class CorruptBackupError(BackupError):
    """A backup file is missing, truncated, or does not match its manifest checksum."""


class StorageError(BackupError):
    """The storage backend refused an operation (permissions, missing bucket, I/O error)."""
