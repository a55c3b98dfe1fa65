"""Where backups live: a directory or an S3 bucket, behind one small interface.

Every object is written whole and atomically (a temporary file renamed into place, or one S3 PUT),
so a reader sees either the old object or the new one and never half a file: that is what lets
the manifest be the single commit point of a backup. Keys are ``/``-separated paths relative to
the storage root (``<backup_id>/manifest.json``).

boto3 is imported lazily, so filesystem backups do not need it installed.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from kompakt.backup.errors import StorageError

READ_PIECE_BYTES = 4 * 1024 * 1024
#: How much a staged object may hold unsynced before its writeback is started (not waited for).
WRITEBACK_BYTES = 8 * 1024 * 1024


class StagedObject:
    """An object written as it grows, into a temporary file beside its key, and put in place
    whole by :meth:`FilesystemStorage.put` (fsync, rename): still one atomic object, but its bytes
    reach the disk while the backup keeps reading, not all at the end of the run.

    A segment's bytes used to be held in memory until the segment was full and then written and
    fsynced at once: with four partitions that ended together, the run's last second was nothing
    but writes. Every :data:`WRITEBACK_BYTES` the kernel is asked to start writing the file back
    (``POSIX_FADV_DONTNEED`` starts the writeback of dirty pages without waiting), so the
    fsync of the commit finds little left to write. (Pages being written back stay cached; only
    pages the kernel had already written are dropped.)"""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._fd, self._tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        except FileNotFoundError:  # the partition's first file (a mkdir for every file waits on the
            path.parent.mkdir(parents=True, exist_ok=True)  # directory while it is being fsynced)
            self._fd, self._tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        self.size = 0
        self._unsynced = 0

    def write(self, *pieces: bytes | bytearray | memoryview) -> None:
        """Append ``pieces`` (one ``writev``; the GIL is released while the kernel copies)."""
        total = sum(len(p) for p in pieces)
        try:
            written = os.writev(self._fd, pieces)
            if written < total:  # a short write (a signal, a full disk): finish it piece by piece
                view = memoryview(b"".join(bytes(p) for p in pieces)[written:])
                while view:
                    view = view[os.write(self._fd, view) :]
        except OSError as exc:
            raise StorageError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        self.size += total
        self._unsynced += total
        if self._unsynced >= WRITEBACK_BYTES and hasattr(os, "posix_fadvise"):
            os.posix_fadvise(self._fd, self.size - self._unsynced, self._unsynced, os.POSIX_FADV_DONTNEED)
            self._unsynced = 0

    def read_back(self) -> bytes:
        """The bytes written so far (for a backend that cannot rename a local file into place)."""
        return Path(self._tmp).read_bytes()

    def commit(self, path: Path) -> None:
        """fsync the file and rename it to ``path`` (:meth:`FilesystemStorage.put` then fsyncs
        the directory)."""
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = -1
        os.replace(self._tmp, path)

    def discard(self) -> None:
        """Remove the temporary file (a write failed, or the run stopped before the commit)."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1
        with contextlib.suppress(OSError):
            os.unlink(self._tmp)


Data = bytes | Sequence[bytes | bytearray | memoryview] | StagedObject
"""An object's bytes, whole, as pieces written one after the other (not joined in memory), or
already written to a temporary file by :meth:`FilesystemStorage.stage`."""


class Storage(Protocol):
    """The operations backup and restore need from a backend."""

    def describe(self) -> str:
        """A human-readable location (``/backups`` or ``s3://bucket/prefix``)."""
        ...

    def put(self, key: str, data: Data) -> None:
        """Write ``data`` at ``key`` atomically, replacing any previous object."""
        ...

    def get(self, key: str) -> bytes:
        """Read the whole object; StorageError when it is missing or unreadable."""
        ...

    def read_pieces(self, key: str) -> Iterator[bytes | memoryview]:
        """The object in pieces, in order (each valid until the next is asked for): a check
        that reads every byte once does not need the object in memory."""
        ...

    def exists(self, key: str) -> bool: ...

    def list(self, prefix: str) -> list[str]:
        """Keys under ``prefix`` (a folder path ending in ``/`` or empty), sorted."""
        ...

    def check_writable(self) -> None:
        """Fail early (before any data is copied) when the location cannot be written."""
        ...


class FilesystemStorage:
    """A directory; writes go through a temporary file, fsync and rename."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser()

    def describe(self) -> str:
        return str(self.root)

    def _path(self, key: str) -> Path:
        parts = [p for p in key.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise StorageError(f"invalid storage key {key!r}")
        return self.root.joinpath(*parts)

    def stage(self, key: str) -> StagedObject:
        """A temporary file for ``key``, written piece by piece and put in place by :meth:`put`."""
        path = self._path(key)
        try:
            return StagedObject(path)
        except OSError as exc:
            raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None

    def put(self, key: str, data: Data) -> None:
        path = self._path(key)
        try:
            if isinstance(data, StagedObject):
                try:
                    data.commit(path)
                except BaseException:
                    data.discard()
                    raise
                _fsync_dir(path.parent)
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as handle:
                    if isinstance(data, bytes):
                        handle.write(data)
                    else:
                        handle.writelines(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            _fsync_dir(path.parent)
        except OSError as exc:
            raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None

    def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise StorageError(f"{path} does not exist") from None
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from None

    def read_pieces(self, key: str) -> Iterator[bytes | memoryview]:
        path = self._path(key)
        buf = bytearray(READ_PIECE_BYTES)
        view = memoryview(buf)
        try:
            with open(path, "rb", buffering=0) as handle:
                while n := handle.readinto(buf):
                    yield view[:n]
        except FileNotFoundError:
            raise StorageError(f"{path} does not exist") from None
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from None

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str) -> list[str]:
        base = self._path(prefix) if prefix else self.root
        if not base.is_dir():
            return []
        keys = []
        for path in base.rglob("*"):
            if path.is_file() and not path.name.endswith(".tmp"):
                keys.append(path.relative_to(self.root).as_posix())
        return sorted(keys)

    def check_writable(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create {self.root}: {exc.strerror or exc}") from None
        if not os.access(self.root, os.W_OK):
            raise StorageError(f"{self.root} is not writable")


def _fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable."""
    dir_fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _boto3() -> Any:
    """boto3, untyped (it ships no annotations), imported only when an S3 backend is used."""
    try:
        return importlib.import_module("boto3")
    except ImportError:
        raise StorageError("the s3 backend needs boto3 (pip install boto3)") from None


class S3Storage:
    """An S3 (or S3-compatible: MinIO, moto, Ceph) bucket and key prefix.

    A PUT of one object is atomic in S3, so no temporary keys are needed. Credentials come from
    the usual boto3 chain (environment, profile, instance role); ``endpoint_url`` points at a
    compatible server.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        client: Any = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        path_style: bool = False,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url
        if client is None:
            boto3 = _boto3()
            config = importlib.import_module("botocore.config").Config(
                retries={"max_attempts": 3, "mode": "standard"},
                connect_timeout=10,
                read_timeout=60,
                s3={"addressing_style": "path"} if path_style else None,
            )
            credentials: dict[str, str] = {}
            if access_key and secret_key:
                # Given in the file (OSO's storage.access_key/secret_key); else boto3's usual chain.
                credentials = {"aws_access_key_id": access_key, "aws_secret_access_key": secret_key}
            client = boto3.client(
                "s3", endpoint_url=endpoint_url, region_name=region, config=config, **credentials
            )
        self.client = client

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _fail(self, action: str, key: str, exc: Exception) -> StorageError:
        response = getattr(exc, "response", None) or {}
        error = response.get("Error", {}) if isinstance(response, dict) else {}
        code = error.get("Code") or type(exc).__name__
        message = error.get("Message") or str(exc)
        return StorageError(f"cannot {action} s3://{self.bucket}/{self._key(key)}: {code}: {message}")

    def put(self, key: str, data: Data) -> None:
        if isinstance(data, StagedObject):
            body = data.read_back()
            data.discard()
        else:
            body = data if isinstance(data, bytes) else b"".join(data)
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=body)
        except Exception as exc:  # noqa: BLE001 - botocore raises many unrelated types
            raise self._fail("write", key, exc) from None

    def get(self, key: str) -> bytes:
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
            body: bytes = response["Body"].read()
            return body
        except Exception as exc:  # noqa: BLE001
            raise self._fail("read", key, exc) from None

    def read_pieces(self, key: str) -> Iterator[bytes | memoryview]:
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
            yield from response["Body"].iter_chunks(READ_PIECE_BYTES)
        except Exception as exc:  # noqa: BLE001
            raise self._fail("read", key, exc) from None

    def exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            return True
        except Exception as exc:  # noqa: BLE001
            response = getattr(exc, "response", None) or {}
            code = str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""
            if code in ("404", "NoSuchKey", "NotFound"):
                return False
            raise self._fail("read", key, exc) from None

    def list(self, prefix: str) -> list[str]:
        full = self._key(prefix) if prefix else (f"{self.prefix}/" if self.prefix else "")
        keys: list[str] = []
        try:
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=full):
                for item in page.get("Contents", []):
                    key = str(item["Key"])
                    keys.append(key[len(self.prefix) + 1 :] if self.prefix else key)
        except Exception as exc:  # noqa: BLE001
            raise self._fail("list", prefix, exc) from None
        return sorted(keys)

    def check_writable(self) -> None:
        """Write and delete a probe object: a missing bucket or a read-only policy fails here."""
        probe = ".kompakt-write-probe"
        self.put(probe, b"")
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(probe))
        except Exception as exc:  # noqa: BLE001
            raise self._fail("delete", probe, exc) from None


def parse_location(location: str, *, endpoint_url: str | None = None) -> Storage:
    """``s3://bucket/prefix`` or a directory path, for the ``list`` and ``describe`` commands."""
    if location.startswith("s3://"):
        rest = location[len("s3://") :]
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise StorageError(f"{location!r} names no bucket")
        return S3Storage(bucket, prefix, endpoint_url=endpoint_url)
    return FilesystemStorage(location)
