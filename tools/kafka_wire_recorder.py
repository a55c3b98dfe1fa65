# ruff: noqa: T201  (a development tool: prints its findings)
"""A recording TCP proxy for the Kafka wire protocol, and a diff of two recordings (issue 30).

``record LISTEN_PORT UPSTREAM_HOST:PORT OUT.jsonl`` forwards every connection made to
``127.0.0.1:LISTEN_PORT`` to the broker byte for byte, and writes each request and its response
as one JSON line: time, connection, client id, API, version, the request and the response decoded
with kompakt's protocol codecs (record batches summarised: offsets, producer id/epoch,
transactional/control flags, record count). The broker must advertise the proxy's address
(``advertised.listeners=PLAINTEXT://127.0.0.1:LISTEN_PORT``), or clients bypass it after their
first Metadata.

``diff A.jsonl B.jsonl [--client-id ID] [--since-file A.t B.t]`` normalises both (producer ids
numbered in order of appearance, timestamps, throttle times, node ids, session ids and epochs,
cluster ids dropped), turns each into steps ``API vVERSION request-summary -> errors``, folds
runs of identical steps, and prints the two step lists side by side with their differences.

Decoding is kompakt's (kio's classes); a frame that does not decode is recorded as such and still
forwarded unchanged, so the proxy never changes what the two sides see.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import difflib
import enum
import json
import struct
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from kompakt.protocol import codec
from kompakt.protocol.apis import VersionRange
from kompakt.records.batch import iter_batches

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")
#: A bound on one frame, as a broker's socket.request.max.bytes (100 MiB).
MAX_FRAME = 100 * 1024 * 1024


def _batches(raw: bytes | memoryview) -> list[dict[str, Any]]:
    return [
        {
            "base": b.base_offset,
            "last": b.last_offset,
            "count": b.records_count,
            "pid": b.producer_id,
            "epoch": b.producer_epoch,
            "seq": b.base_sequence,
            "txn": b.is_transactional,
            "control": b.is_control,
        }
        for b in iter_batches(raw)
    ]


def plain(value: object) -> object:
    """A kio object as JSON-able data; records become batch summaries."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            return {"batches": _batches(bytes(value))}
        except Exception:  # noqa: BLE001 - not a record set: its length is what can be compared
            return {"bytes": len(value)}
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


class Recorder:
    """The proxy: one upstream connection per client connection, both directions recorded."""

    def __init__(self, upstream: tuple[str, int], out: Path) -> None:
        self.upstream = upstream
        self.out = out.open("a", buffering=1)
        self.connections = 0

    async def serve(self, port: int) -> None:
        server = await asyncio.start_server(self.handle, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    async def handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn = self.connections
        try:
            broker_r, broker_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_w.close()
            return
        pending: dict[int, tuple[int, int, str | None, object, float]] = {}
        await asyncio.gather(
            self._requests(conn, client_r, broker_w, pending),
            self._responses(conn, broker_r, client_w, pending),
            return_exceptions=True,
        )
        for w in (client_w, broker_w):
            w.close()

    async def _requests(
        self,
        conn: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pending: dict[int, tuple[int, int, str | None, object, float]],
    ) -> None:
        try:
            while True:
                size_bytes = await reader.readexactly(4)
                (size,) = _SIZE.unpack(size_bytes)
                if not 0 < size <= MAX_FRAME:
                    raise ConnectionError(f"request frame of {size} bytes")
                frame = await reader.readexactly(size)
                api_key, version, correlation = _HEADER.unpack_from(frame, 0)
                client_id: str | None = None
                body: object
                try:
                    decoded = codec.decode_request(frame, {api_key: VersionRange(version, version)})
                    client_id, body = decoded.client_id, plain(decoded.body)
                except Exception as exc:  # noqa: BLE001 - recorded, forwarded unchanged
                    body = {"undecoded": str(exc)}
                pending[correlation] = (api_key, version, client_id, body, time.time())
                writer.write(size_bytes + frame)
                await writer.drain()
        finally:
            writer.close()

    async def _responses(
        self,
        conn: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pending: dict[int, tuple[int, int, str | None, object, float]],
    ) -> None:
        try:
            while True:
                size_bytes = await reader.readexactly(4)
                (size,) = _SIZE.unpack(size_bytes)
                if not 0 < size <= MAX_FRAME:
                    raise ConnectionError(f"response frame of {size} bytes")
                frame = await reader.readexactly(size)
                writer.write(size_bytes + frame)
                (correlation,) = _SIZE.unpack_from(frame, 0)
                request = pending.pop(correlation, None)
                if request is None:
                    continue
                api_key, version, client_id, body, sent = request
                response: object
                try:
                    _, payload = codec.decode_response(frame, api_key, version)
                    response = plain(payload)
                except Exception as exc:  # noqa: BLE001 - recorded, forwarded unchanged
                    response = {"undecoded": str(exc)}
                entry = {
                    "t": sent,
                    "rtt_ms": round((time.time() - sent) * 1000, 1),
                    "conn": conn,
                    "client": client_id,
                    "api": codec.api_name(api_key),
                    "v": version,
                    "request": body,
                    "response": response,
                }
                self.out.write(json.dumps(entry) + "\n")
                await writer.drain()
        finally:
            writer.close()


# ---------------------------------------------------------------------------------------------
# Normalising and diffing two recordings


#: Fields that differ between any two runs or brokers and say nothing about behaviour.
VOLATILE = {
    "throttle_time",
    "session_id",
    "session_epoch",
    "cluster_id",
    "node_id",
    "leader_id",
    "controller_id",
    "coordinator_key",
    "host",
    "port",
    "member_id",
    "generation_id",
    "transactional_id",
    "group_id",
    "client_id",
    "rtt_ms",
}


def errors(value: object) -> list[str]:
    """Every error code other than NONE anywhere in a response, in order."""
    found: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "error_code" and v != "none":
                found.append(str(v))
            else:
                found.extend(errors(v))
    elif isinstance(value, list):
        for v in value:
            found.extend(errors(v))
    return found


def summary(entry: dict[str, Any]) -> str:
    """The request fields that say what was asked (isolation level, require_stable, topics)."""
    request = entry["request"]
    api = entry["api"]
    parts: list[str] = []
    if not isinstance(request, dict):
        return ""
    for name in ("isolation_level", "require_stable", "committed", "key_type"):
        if name in request:
            parts.append(f"{name}={request[name]}")
    if api == "init_producer_id":
        parts.append(f"transactional={request.get('transactional_id') is not None}")
    topics = request.get("topics") or request.get("groups") or []
    names: list[str] = []
    for t in topics if isinstance(topics, list) else []:
        if isinstance(t, dict):
            n = t.get("name") or t.get("topic") or t.get("group_id")
            if isinstance(n, str):
                names.append(_topic_role(n))
    if names:
        parts.append("topics=" + ",".join(sorted(set(names))))
    return " ".join(parts)


def _topic_role(name: str) -> str:
    """A topic by its role in the faust scenario (names carry the run id)."""
    if name.endswith("-changelog"):
        return "changelog"
    if name.startswith("__"):
        return name
    return name.split("-")[0]


def steps(path: Path, client_prefix: str | None, since: float, until: float = float("inf")) -> list[str]:
    out: list[str] = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if not since <= entry["t"] < until:
            continue
        if client_prefix and not str(entry.get("client") or "").startswith(client_prefix):
            continue
        if entry["api"] in {"heartbeat"}:
            continue
        errs = errors(entry["response"])
        step = f"{entry['api']} v{entry['v']} {summary(entry)} -> {','.join(sorted(set(errs))) or 'NONE'}"
        if not out or out[-1] != step:
            out.append(step)
    return out


def counted(path: Path, client_prefix: str | None, since: float) -> dict[str, int]:
    """How often each (API, version, request summary, errors) step occurs, in order of first use."""
    counts: dict[str, int] = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if entry["t"] < since or (
            client_prefix and not str(entry.get("client") or "").startswith(client_prefix)
        ):
            continue
        errs = errors(entry["response"])
        key = f"{entry['api']} v{entry['v']} | {summary(entry)} | {','.join(sorted(set(errs))) or 'NONE'}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def table(a: Path, b: Path, client_prefix: str | None, since: tuple[float, float]) -> int:
    """A markdown table: every distinct step with its count on each side."""
    ca, cb = counted(a, client_prefix, since[0]), counted(b, client_prefix, since[1])
    print("| API version | request | errors | A | B |")
    print("|---|---|---|---|---|")
    for key in [*ca, *(k for k in cb if k not in ca)]:
        api, request, errs = key.split(" | ")
        print(f"| {api} | {request} | {errs} | {ca.get(key, 0)} | {cb.get(key, 0)} |")
    return 1 if set(ca) != set(cb) else 0


def diff(a: Path, b: Path, client_prefix: str | None, since: tuple[float, float]) -> int:
    sa, sb = steps(a, client_prefix, since[0]), steps(b, client_prefix, since[1])
    print(f"{a}: {len(sa)} steps; {b}: {len(sb)} steps (runs of identical steps folded)")
    differences = 0
    for line in difflib.unified_diff(sa, sb, str(a), str(b), lineterm="", n=2):
        print(line)
        differences += line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
    print(f"{differences} differing lines")
    print("\nDistinct (API, version, request, errors) on each side:")
    ca, cb = set(sa), set(sb)
    for step in sorted(ca | cb):
        mark = "both" if step in ca and step in cb else ("A only" if step in ca else "B only")
        print(f"  {mark:7} {step}")
    return 1 if ca != cb else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("listen_port", type=int)
    rec.add_argument("upstream")
    rec.add_argument("out", type=Path)
    d = sub.add_parser("diff")
    d.add_argument("a", type=Path)
    d.add_argument("b", type=Path)
    d.add_argument("--client-id", default=None, help="only requests whose client id starts with this")
    d.add_argument("--since", nargs=2, type=float, default=(0.0, 0.0), help="epoch seconds, A and B")
    d.add_argument("--table", action="store_true", help="a markdown table of the steps with counts")
    args = parser.parse_args()
    if args.command == "record":
        host, _, port = args.upstream.rpartition(":")
        asyncio.run(Recorder((host, int(port)), args.out).serve(args.listen_port))
        return 0
    if args.table:
        return table(args.a, args.b, args.client_id, tuple(args.since))
    return diff(args.a, args.b, args.client_id, tuple(args.since))


if __name__ == "__main__":
    sys.exit(main())
