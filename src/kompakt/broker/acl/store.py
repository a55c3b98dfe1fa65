"""ACLs on disk: ``<data-dir>/kompakt-acls.json``, replaced atomically on every change.

Kafka keeps ACLs as records in its metadata log; kompakt has no metadata log, so it keeps the
whole set in one JSON document written as ``kompakt-topics.json`` is (temp file, fsync, rename,
fsync of the directory), so a crash leaves either the old set or the new one, never a mix. A
file that cannot be read is an error at start-up naming the file: starting with no ACLs would
silently open a broker that was meant to be closed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kompakt.broker.acl.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from kompakt.errors import KompaktError
from kompakt.log.files import DEFAULT_FILE_OPS, FileOps, atomic_write_bytes

ACLS_FILE = "kompakt-acls.json"
_VERSION = 1


class CorruptAclStoreError(KompaktError):
    """``kompakt-acls.json`` exists but cannot be read; the message names the file."""


class AclStore:
    """Reads and replaces the ACL file of one data directory."""

    def __init__(self, data_dir: str | Path, file_ops: FileOps = DEFAULT_FILE_OPS) -> None:
        self.path = Path(data_dir) / ACLS_FILE
        self._file_ops = file_ops

    def load(self) -> list[AclBinding]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            document = json.loads(raw)
            if document.get("version") != _VERSION:
                raise ValueError(f"unsupported version {document.get('version')!r}")
            return [_from_json(item) for item in document["acls"]]
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise CorruptAclStoreError(
                f"{self.path} cannot be read ({error}); fix or restore it (the broker does not start "
                "without its ACLs)"
            ) from error

    def save(self, bindings: Sequence[AclBinding]) -> None:
        document = {"version": _VERSION, "acls": [_to_json(binding) for binding in bindings]}
        atomic_write_bytes(self.path, (json.dumps(document, indent=2) + "\n").encode(), self._file_ops)


def _to_json(binding: AclBinding) -> dict[str, str]:
    pattern, entry = binding.pattern, binding.entry
    return {
        "resource_type": pattern.resource_type.name,
        "name": pattern.name,
        "pattern_type": pattern.pattern_type.name,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation.name,
        "permission": entry.permission.name,
    }


def _from_json(item: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            ResourceType[item["resource_type"]], str(item["name"]), PatternType[item["pattern_type"]]
        ),
        AccessControlEntry(
            str(item["principal"]),
            str(item["host"]),
            AclOperation[item["operation"]],
            PermissionType[item["permission"]],
        ),
    )
