"""The asyncio server end to end on 127.0.0.1:0 with raw kio-encoded frames, plus a fuzz run."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest

from kompakt.broker.context import Broker, HandlerSpec, RequestContext
from kompakt.broker.dispatch import HANDLERS, Dispatcher
from kompakt.broker.groups import GroupConfig
from kompakt.clock import FakeClock
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from kompakt.server.app import KafkaServer
from tests.support.wire import read_frame, request_bytes, size_prefixed

TIMEOUT_S = 5.0


async def until(condition: Callable[[], bool], what: str) -> None:
    """Let the server run until ``condition`` holds; fail naming ``what`` after ``TIMEOUT_S``."""
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not reached within {TIMEOUT_S} s"
        await asyncio.sleep(0.001)  # the polling interval; the deadline is the check


class Client:
    """A minimal Kafka client over one socket: send frames, read responses by correlation id."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.next_id = 0

    @classmethod
    async def connect(cls, server: KafkaServer) -> Client:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        return cls(reader, writer)

    def send(self, api_key: int, version: int, values: Mapping[str, object]) -> int:
        self.next_id += 1
        self.writer.write(request_bytes(api_key, version, values, self.next_id))
        return self.next_id

    async def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        return codec.decode_response(await read_frame(self.reader, TIMEOUT_S), api_key, version)

    async def request(self, api_key: int, version: int, values: Mapping[str, object]) -> Any:
        sent = self.send(api_key, version, values)
        correlation_id, response = await self.receive(api_key, version)
        assert correlation_id == sent
        return response

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


def members(server: KafkaServer, group_id: str) -> int:
    """How many members the coordinator holds for ``group_id`` (joins still pending included)."""
    group = server.broker.groups.group(group_id)
    return 0 if group is None else len(group.members)


def blocking_echo(ctx: RequestContext, request: codec.RequestPayload) -> codec.ResponsePayload | None:
    """A stand-in storage handler: proves it runs off the event loop thread."""
    assert threading.current_thread() is not threading.main_thread()
    return None  # like Produce with acks=0


def with_server(scenario: Callable[[KafkaServer], Awaitable[None]]) -> None:
    """Run ``scenario`` against a fresh server on an ephemeral port (no pytest-asyncio needed)."""

    async def main() -> None:
        broker = Broker.create(
            clock=FakeClock(), group_config=GroupConfig(group_initial_rebalance_delay_ms=0), advertised_port=0
        )
        table = dict(HANDLERS)
        table[ApiKey.INIT_PRODUCER_ID] = HandlerSpec(
            ApiKey.INIT_PRODUCER_ID, 0, 4, blocking_echo, blocking=True
        )
        server = KafkaServer(broker, "127.0.0.1", 0, dispatcher=Dispatcher(broker, table), tick_interval_ms=5)
        await server.start()
        try:
            await asyncio.wait_for(scenario(server), 20)
        finally:
            await server.close(grace_s=1.0)

    asyncio.run(main())


JOIN = {
    "group_id": "g",
    "session_timeout": 10_000,
    "rebalance_timeout": 10_000,
    "member_id": "",
    "protocol_type": "consumer",
    "protocols": [{"name": "range", "metadata": b"sub"}],
}
API_VERSIONS = {"client_software_name": "test", "client_software_version": "1"}


async def join_group(client: Client, version: int, values: dict[str, object]) -> Any:
    """JoinGroup, with the KIP-394 round trip: v4+ first answers MEMBER_ID_REQUIRED and an id."""
    joined = await client.request(ApiKey.JOIN_GROUP, version, values)
    if version >= 4 and not values.get("member_id"):
        assert joined.error_code == E.member_id_required and joined.member_id
        joined = await client.request(ApiKey.JOIN_GROUP, version, values | {"member_id": joined.member_id})
    return joined


def test_consumer_group_cycle() -> None:
    with_server(scenario_consumer_group_cycle)


async def scenario_consumer_group_cycle(server: KafkaServer) -> None:
    client = await Client.connect(server)
    versions = await client.request(ApiKey.API_VERSIONS, 3, API_VERSIONS)
    assert versions.error_code == E.none
    assert {k.api_key for k in versions.api_keys} >= {ApiKey.JOIN_GROUP, ApiKey.OFFSET_FETCH}

    coordinator = await client.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    assert (coordinator.host, coordinator.port) == ("localhost", server.port)

    joined = await join_group(client, 7, JOIN)
    member, generation = joined.member_id, joined.generation_id
    assert joined.error_code == E.none and joined.leader == member
    sync = {
        "group_id": "g",
        "generation_id": generation,
        "member_id": member,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": member, "assignment": b"t-0"}],
    }
    assert (await client.request(ApiKey.SYNC_GROUP, 5, sync)).assignment == b"t-0"
    beat = {"group_id": "g", "generation_id": generation, "member_id": member}
    assert (await client.request(ApiKey.HEARTBEAT, 4, beat)).error_code == E.none

    commit = {
        "group_id": "g",
        "generation_id_or_member_epoch": generation,
        "member_id": member,
        "topics": [
            {
                "name": "t",
                "partitions": [{"partition_index": 0, "committed_offset": 9, "committed_metadata": ""}],
            }
        ],
    }
    committed = await client.request(ApiKey.OFFSET_COMMIT, 8, commit)
    assert committed.topics[0].partitions[0].error_code == E.none
    fetched = await client.request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "g", "topics": None}]})
    assert fetched.groups[0].topics[0].partitions[0].committed_offset == 9

    left = await client.request(ApiKey.LEAVE_GROUP, 5, {"group_id": "g", "members": [{"member_id": member}]})
    assert left.members[0].error_code == E.none
    await client.close()


def test_api_versions_fallback_then_retry() -> None:
    with_server(scenario_api_versions_fallback_then_retry)


async def scenario_api_versions_fallback_then_retry(server: KafkaServer) -> None:
    client = await Client.connect(server)
    client.writer.write(struct.pack(">ihhi", 8 + 2, 18, 9, 77) + b"\xff\xff")
    correlation_id, fallback = await client.receive(ApiKey.API_VERSIONS, 0)
    assert (correlation_id, fallback.error_code) == (77, E.unsupported_version)
    assert (await client.request(ApiKey.API_VERSIONS, 4, API_VERSIONS)).error_code == E.none
    await client.close()


def test_pipelined_responses_stay_in_order_behind_a_deferred_join() -> None:
    with_server(scenario_pipelined_responses_stay_in_order_behind_a_deferred_join)


async def scenario_pipelined_responses_stay_in_order_behind_a_deferred_join(server: KafkaServer) -> None:
    leader = await Client.connect(server)
    first = await join_group(leader, 5, JOIN)
    follower = await Client.connect(server)
    required = await follower.request(ApiKey.JOIN_GROUP, 5, JOIN)
    join_id = follower.send(ApiKey.JOIN_GROUP, 5, JOIN | {"member_id": required.member_id})
    no_answer_id = follower.send(
        ApiKey.INIT_PRODUCER_ID, 0, {"transactional_id": None, "transaction_timeout": 1}
    )
    versions_id = follower.send(ApiKey.API_VERSIONS, 0, {})
    await follower.writer.drain()
    await until(lambda: members(server, "g") == 2, "the server parks the follower's join")
    rejoined = await leader.request(ApiKey.JOIN_GROUP, 5, JOIN | {"member_id": first.member_id})
    assert rejoined.generation_id == 2
    correlation_id, joined = await follower.receive(ApiKey.JOIN_GROUP, 5)
    assert (correlation_id, joined.generation_id) == (join_id, 2)
    correlation_id, _ = await follower.receive(ApiKey.API_VERSIONS, 0)
    assert correlation_id == versions_id > no_answer_id
    await leader.close()
    await follower.close()


def test_tick_task_expires_sessions() -> None:
    with_server(scenario_tick_task_expires_sessions)


async def scenario_tick_task_expires_sessions(server: KafkaServer) -> None:
    client = await Client.connect(server)
    joined = await join_group(client, 5, JOIN)
    assert joined.error_code == E.none and joined.generation_id == 1
    clock = server.broker.clock
    assert isinstance(clock, FakeClock)
    clock.advance(10_001)  # the sync never comes: the leader is dropped after the rebalance timeout
    await until(lambda: members(server, "g") == 0, "the tick task drops the leader")
    beat = {"group_id": "g", "generation_id": joined.generation_id, "member_id": joined.member_id}
    assert (await client.request(ApiKey.HEARTBEAT, 4, beat)).error_code == E.unknown_member_id
    await client.close()


def header_v2(api_key: int, version: int) -> bytes:
    """Request header v2: key, version, correlation id 1, client id "c", no tagged fields."""
    return struct.pack(">hhih", api_key, version, 1, 1) + b"c\x00"


#: A compact-array count of 2^32 - 2: kio 0.6.5 sizes a 34 GB vector from it and aborts the process.
HUGE_COUNT = b"\xff\xff\xff\xff\x0f"

#: Issue 14's frames, size prefix included: a first array whose count no frame can back.
ISSUE_FRAMES = {
    name: size_prefixed(body)
    for name, body in {
        "metadata_v12": header_v2(ApiKey.METADATA, 12) + HUGE_COUNT + b"\x00" * 20,
        "produce_v9": header_v2(ApiKey.PRODUCE, 9)
        + b"\x00"
        + struct.pack(">hi", 1, 30_000)
        + HUGE_COUNT
        + b"\x00" * 20,
        "create_topics_v5": header_v2(ApiKey.CREATE_TOPICS, 5) + HUGE_COUNT + b"\x00" * 20,
        "fetch_v12": header_v2(ApiKey.FETCH, 12)
        + struct.pack(">iiiibii", -1, 500, 1, 52_428_800, 0, 0, -1)
        + HUGE_COUNT
        + b"\x00" * 20,
    }.items()
}

#: Decodes size-prefixed frames from stdin; exits 0 unless a decode takes the interpreter down.
_DECODE_ALL = """
import struct, sys
from kompakt.protocol import codec
from kompakt.protocol.apis import VersionRange
supported = {key: VersionRange(0, 0x7FFF) for key in range(128)}
data = sys.stdin.buffer.read()
position = 0
while position < len(data):
    (size,) = struct.unpack_from(">i", data, position)
    try:
        codec.decode_request(data[position + 4 : position + 4 + size], supported)
    except codec.ProtocolError:
        pass
    position += 4 + size
"""


def assert_decoding_cannot_abort(cases: list[bytes]) -> None:
    """Decode every well-framed case in a child process first: a frame that aborts the decoder
    (a failed native allocation) would take the in-process server and the test worker with it,
    so it fails here, as a test failure, instead."""
    framed = [case for case in cases if len(case) >= 4 and struct.unpack_from(">i", case)[0] == len(case) - 4]
    result = subprocess.run(
        [sys.executable, "-c", _DECODE_ALL],
        input=b"".join(framed),
        capture_output=True,
        timeout=120,
        check=False,
    )
    first_line = result.stderr.decode(errors="replace").strip().splitlines()[:1]
    assert result.returncode == 0, (
        f"decoding these frames kills the interpreter ({result.returncode}): {first_line}"
    )


def length_field_mutations(frame: bytes) -> list[bytes]:
    """A valid frame (size prefix included) with each length field set to extreme values."""
    body = frame[4:]
    cases = []
    for mark in codec.length_fields(body):
        head, tail = body[: mark.position], body[mark.position + mark.width :]
        if mark.encoding == "uvarint":
            replacements = [b"\x00", bytes([len(tail) + 2]) if len(tail) < 126 else b"\x7f", HUGE_COUNT]
        else:
            width = {"int8": 1, "int16": 2, "int32": 4}[mark.encoding]
            replacements = [v.to_bytes(width, "big", signed=True) for v in (-2, 2 ** (8 * width - 1) - 1)]
        for replacement in replacements:
            mutated = head + replacement + tail
            cases.append(size_prefixed(mutated))
    return cases


def mutations(seed: int) -> list[bytes]:
    """Valid frames with random damage, every length field at extreme values, random garbage,
    hostile size prefixes, and issue 14's frames."""
    rng = random.Random(seed)
    valid = [
        request_bytes(ApiKey.JOIN_GROUP, 7, JOIN),
        request_bytes(ApiKey.API_VERSIONS, 3, API_VERSIONS),
        request_bytes(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "g", "topics": None}]}),
        request_bytes(ApiKey.LEAVE_GROUP, 5, {"group_id": "g", "members": [{"member_id": "x"}]}),
    ]
    cases = [mutated for frame in valid for mutated in length_field_mutations(frame)]
    cases += ISSUE_FRAMES.values()
    for _ in range(150):
        data = bytearray(rng.choice(valid))
        for _ in range(rng.randint(1, 6)):
            position = rng.randrange(4, len(data))
            data[position] = rng.randrange(256)
        if rng.random() < 0.3:
            data = data[: rng.randrange(4, len(data))]
            data[0:4] = struct.pack(">i", len(data) - 4)
        cases.append(bytes(data))
    for _ in range(50):
        body = rng.randbytes(rng.randrange(0, 40))
        cases.append(size_prefixed(body))
    cases += [struct.pack(">i", -5), struct.pack(">i", 2**31 - 1), b"\x00\x00\x00\x00"]
    return cases


async def send_and_drain(server: KafkaServer, data: bytes) -> None:
    """Send one case and read until the server closes; a mutated JoinGroup may legitimately stay
    pending (it waits for a rebalance), so a quiet connection is given up on after a short while."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(data)
    writer.write_eof()
    with contextlib.suppress(ConnectionError, TimeoutError):
        await asyncio.wait_for(reader.read(), 1.0)
    writer.close()


def test_fuzzed_frames_never_take_the_server_down(caplog: pytest.LogCaptureFixture) -> None:
    assert_decoding_cannot_abort(mutations(seed=20240601))
    with_server(scenario_fuzzed_frames_never_take_the_server_down)
    # Bad frames are refused with one warning each; no handler may crash on a frame that decodes.
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("closing connection" in r.getMessage() for r in caplog.records)


async def scenario_fuzzed_frames_never_take_the_server_down(server: KafkaServer) -> None:
    cases = mutations(seed=20240601)
    await asyncio.gather(*(send_and_drain(server, data) for data in cases))
    client = await Client.connect(server)
    assert (await client.request(ApiKey.API_VERSIONS, 3, API_VERSIONS)).error_code == E.none
    await client.close()


def test_issue_frames_close_their_connection_and_the_broker_keeps_serving(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert_decoding_cannot_abort(list(ISSUE_FRAMES.values()))
    with_server(scenario_issue_frames)
    closed = [r.getMessage() for r in caplog.records if "closing connection" in r.getMessage()]
    assert len(closed) == len(ISSUE_FRAMES)
    assert all("tried to allocate a collection of size 4294967294" in message for message in closed)


async def scenario_issue_frames(server: KafkaServer) -> None:
    bystander = await Client.connect(server)  # a client connected all along, on its own socket
    assert (await bystander.request(ApiKey.API_VERSIONS, 3, API_VERSIONS)).error_code == E.none
    for name, frame in ISSUE_FRAMES.items():
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(frame)
        # The server closes this connection without an answer (there is no request to answer)...
        assert await asyncio.wait_for(reader.read(), TIMEOUT_S) == b"", name
        writer.close()
        # ...and keeps serving: the other connection, and new ones.
        assert (await bystander.request(ApiKey.API_VERSIONS, 3, API_VERSIONS)).error_code == E.none
        client = await Client.connect(server)
        assert (await client.request(ApiKey.METADATA, 12, METADATA)).topics == ()
        await client.close()
    await bystander.close()


METADATA = {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


def test_close_finishes_and_stops_accepting() -> None:
    asyncio.run(scenario_close())


async def scenario_close() -> None:
    broker = Broker.create(clock=FakeClock(), advertised_port=0)
    server = KafkaServer(broker, "127.0.0.1", 0)
    await server.start()
    client = await Client.connect(server)
    assert (await client.request(ApiKey.API_VERSIONS, 0, {})).error_code == E.none
    await server.close(grace_s=1.0)
    assert await asyncio.wait_for(client.reader.read(), TIMEOUT_S) == b""
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", server.port)
