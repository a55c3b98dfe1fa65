"""SCRAM credentials of the broker's users: ``<data-dir>/kompakt-scram-credentials.json``.

Kafka keeps them in its metadata log (``UserScramCredentialRecord``: user, mechanism, salt,
StoredKey, ServerKey, iterations). kompakt has no metadata log, so it keeps the same fields in one
JSON file, replaced atomically on every change (temp file, fsync, rename, fsync directory, through
the log layer's :class:`~kompakt.log.files.FileOps`) as ``kompakt-topics.json`` is::

    {"version": 1,
     "users": {"alice": {"SCRAM-SHA-256": {"salt": "<base64>", "stored_key": "<base64>",
                                           "server_key": "<base64>", "iterations": 8192}}}}

The password is never stored, nor anything that lets a reader log in (see
:mod:`kompakt.broker.sasl.scram`). A file that cannot be read stops the broker with a message
naming it: it is not replaced, so no credential is lost to a bad edit.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kompakt.broker.sasl.scram import SCRAM_MECHANISMS, ScramCredential
from kompakt.errors import KompaktError
from kompakt.log.files import DEFAULT_FILE_OPS, FileOps, atomic_write_bytes

CREDENTIALS_FILE = "kompakt-scram-credentials.json"
CREDENTIALS_FILE_VERSION = 1


class CorruptCredentialStoreError(KompaktError):
    """The credentials file exists but cannot be read; the message names the file."""


def _encode(credential: ScramCredential) -> dict[str, Any]:
    return {
        "salt": base64.b64encode(credential.salt).decode(),
        "stored_key": base64.b64encode(credential.stored_key).decode(),
        "server_key": base64.b64encode(credential.server_key).decode(),
        "iterations": credential.iterations,
    }


def _decode(raw: Mapping[str, Any]) -> ScramCredential:
    iterations = raw["iterations"]
    if not isinstance(iterations, int) or isinstance(iterations, bool):
        raise ValueError(f"iterations {iterations!r} is not an integer")
    return ScramCredential(
        base64.b64decode(raw["salt"], validate=True),
        base64.b64decode(raw["stored_key"], validate=True),
        base64.b64decode(raw["server_key"], validate=True),
        iterations,
    )


class ScramCredentialStore:
    """Every user's SCRAM credentials, in memory and (with a data directory) on disk.

    Thread-safe: SCRAM logins read it on the event loop while AlterUserScramCredentials writes it
    from a worker thread. A change is on disk before it is visible to logins.
    """

    def __init__(self, data_dir: str | Path | None, file_ops: FileOps = DEFAULT_FILE_OPS) -> None:
        self.path = None if data_dir is None else Path(data_dir) / CREDENTIALS_FILE
        self._file_ops = file_ops
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, ScramCredential]] = self._load()

    def _load(self) -> dict[str, dict[str, ScramCredential]]:
        if self.path is None:
            return {}
        try:
            document = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise CorruptCredentialStoreError(
                f"SCRAM credentials file {self.path} is not valid JSON: {exc}"
            ) from None
        try:
            if document["version"] != CREDENTIALS_FILE_VERSION:
                raise ValueError(f"unsupported version {document['version']!r}")
            users: dict[str, dict[str, ScramCredential]] = {}
            for user, mechanisms in document["users"].items():
                for mechanism in mechanisms:
                    if mechanism not in SCRAM_MECHANISMS:
                        raise ValueError(f"unknown mechanism {mechanism!r} for user {user!r}")
                users[str(user)] = {m: _decode(raw) for m, raw in mechanisms.items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptCredentialStoreError(
                f"SCRAM credentials file {self.path} is corrupt: {exc!r}"
            ) from None
        return users

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        with self._lock:
            return self._users.get(user, {}).get(mechanism)

    def describe(self) -> dict[str, dict[str, int]]:
        """user → mechanism → iterations (what DescribeUserScramCredentials shows)."""
        with self._lock:
            return {
                user: {m: c.iterations for m, c in mechs.items()}
                for user, mechs in self._users.items()
                if mechs
            }

    def apply(
        self,
        upserts: Mapping[tuple[str, str], ScramCredential],
        deletions: set[tuple[str, str]],
    ) -> None:
        """Upsert and delete ``(user, mechanism)`` credentials in one durable change."""
        with self._lock:
            users = {user: dict(mechs) for user, mechs in self._users.items()}
            for user, mechanism in deletions:
                users.get(user, {}).pop(mechanism, None)
            for (user, mechanism), credential in upserts.items():
                users.setdefault(user, {})[mechanism] = credential
            users = {user: mechs for user, mechs in users.items() if mechs}
            self._save(users)
            self._users = users

    def _save(self, users: Mapping[str, Mapping[str, ScramCredential]]) -> None:
        if self.path is None:
            return
        document = {
            "version": CREDENTIALS_FILE_VERSION,
            "users": {
                user: {m: _encode(users[user][m]) for m in sorted(users[user])} for user in sorted(users)
            },
        }
        data = (json.dumps(document, indent=2) + "\n").encode()
        atomic_write_bytes(self.path, data, self._file_ops)
