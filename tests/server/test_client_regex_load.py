"""A pathological client regex on 10 connections leaves the broker responsive (issue 27).

Ten connections send ``(a+)+$`` (a KIP-848 subscription, or a ListTransactions v2 pattern) as
fast as they are answered, against names like ``aaaa…b`` on which a backtracking engine needs
seconds per name; meanwhile a probe connection times Metadata round trips. With the regexes in RE2
and off the event loop, the probe's p99 stays under 50 ms; with Python's ``re`` on the loop one
request froze every connection for seconds.

A real ``kompakt serve`` process, so the broker's event loop and threads are its own and the
measurement includes nothing of the test's; the loops are bounded by deadlines and each read by a
timeout, so a frozen broker fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from kompakt.clock import SystemClock
from kompakt.config.broker import BrokerConfig
from kompakt.log.manager import LogManager
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode
from tests.support.serve import BrokerProcess, launch
from tests.support.wire import read_frame, request_bytes

#: A name backtracking needs ~2^25 steps (over a second) to reject; an automaton 26.
SLOW_NAME = "a" * 25 + "b"
MATCHING_NAME = "aaaa"
EVIL = "(a+)+$"
ATTACKERS = 10
ATTACK_S = 4.0
#: One answer may take this long before the test calls the broker frozen.
READ_TIMEOUT_S = 10.0
P99_LIMIT_S = 0.050
MIN_PROBES = 50
ATTEMPTS = 3
#: Each attacker sends at most one request per PACE_S (500 a second in all, 100,000 times a
#: consumer's heartbeat rate): flooding any request at full speed from 10 connections costs a
#: loaded 2-core machine more than 50 ms on its own, and this test is about the regex.
PACE_S = 0.020
METADATA = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


class Client:
    """One connection speaking raw Kafka frames, one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.correlation_id = 0

    @classmethod
    async def connect(cls, port: int) -> Client:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def request(self, api_key: int, version: int, values: Mapping[str, object]) -> Any:
        self.correlation_id += 1
        self.writer.write(request_bytes(api_key, version, values, self.correlation_id))
        await self.writer.drain()
        answered, response = codec.decode_response(
            await read_frame(self.reader, READ_TIMEOUT_S), api_key, version
        )
        assert answered == self.correlation_id
        return response

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    data_dir = tmp_path / "data"
    manager = LogManager(data_dir, BrokerConfig(), SystemClock())
    manager.open()
    try:
        manager.create_topic(SLOW_NAME, 1)
        manager.create_topic(MATCHING_NAME, 1)
    finally:
        manager.close()
    process = launch(data_dir, "--admin-port", "-1", "--override", "group.initial.rebalance.delay.ms=0")
    try:
        yield process
    finally:
        # A broker frozen in a backtracking regex answers SIGTERM only once the queued requests are
        # through: do not wait for that.
        process.stop(timeout_s=10.0)


class Attack(Protocol):
    """The next request of attacker ``connection`` (its ``n``-th), given its previous answer."""

    def __call__(self, connection: int, n: int, previous: Any) -> tuple[int, int, dict[str, object]]: ...


def heartbeat(connection: int, n: int, previous: Any) -> tuple[int, int, dict[str, object]]:
    """A consumer that subscribes with the evil regex and heartbeats as a member of its own group:
    each heartbeat is a full request, so the regex is validated and resolved every time."""
    values: dict[str, object] = {
        "group_id": f"attack-{connection}",
        "member_id": previous.member_id if previous is not None else str(uuid.uuid4()),
        "member_epoch": previous.member_epoch if previous is not None else 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30_000,
        "subscribed_topic_names": None,
        "subscribed_topic_regex": EVIL,
        "server_assignor": None,
        "topic_partitions": _owned(previous),
    }
    return ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, values


def _owned(previous: Any) -> list[dict[str, object]]:
    """The partitions the last answer assigned (a member reports what it owns)."""
    if previous is None or previous.assignment is None:
        return []
    return [
        {"topic_id": t.topic_id, "partitions": list(t.partitions)}
        for t in previous.assignment.topic_partitions
    ]


def list_transactions(connection: int, n: int, previous: Any) -> tuple[int, int, dict[str, object]]:
    """Every other request a pattern never seen before: compiled and matched against every id."""
    pattern = EVIL if n % 2 == 0 else f"{EVIL}|unused-{connection}-{n}"
    return ApiKey.LIST_TRANSACTIONS, 2, {"transactional_id_pattern": pattern}


async def init_transactional_ids(port: int) -> None:
    client = await Client.connect(port)
    try:
        for transactional_id in (SLOW_NAME, MATCHING_NAME):
            response = await client.request(
                ApiKey.INIT_PRODUCER_ID,
                4,
                {"transactional_id": transactional_id, "transaction_timeout": 60_000},
            )
            assert response.error_code is ErrorCode.none
    finally:
        await client.close()


async def no_setup(port: int) -> None:
    return None


async def warm_up(client: Client) -> None:
    """Benign requests first: the first group write creates ``__consumer_offsets`` and the first
    requests load their modules, one-time costs that are not what this test measures."""
    joined = await client.request(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        1,
        {
            "group_id": "warm-up",
            "member_id": str(uuid.uuid4()),
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": 30_000,
            "subscribed_topic_names": [MATCHING_NAME],
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": [],
        },
    )
    assert joined.error_code is ErrorCode.none, joined
    listed = await client.request(ApiKey.LIST_TRANSACTIONS, 2, {"transactional_id_pattern": None})
    assert listed.error_code is ErrorCode.none, listed
    await client.request(ApiKey.METADATA, 12, METADATA)


@dataclass
class Window:
    """One measurement: the probe's Metadata latencies and the answers each attacker got."""

    latencies: list[float]
    answered: list[int]
    frozen: bool = False

    @property
    def p99(self) -> float:
        ordered = sorted(self.latencies)
        return ordered[int(0.99 * (len(ordered) - 1))] if ordered else float("inf")

    def passed(self) -> bool:
        return (
            not self.frozen
            and all(self.answered)
            and len(self.latencies) >= MIN_PROBES
            and self.p99 < P99_LIMIT_S
        )

    def describe(self) -> str:
        if self.frozen:
            return f"the broker answered nothing for {READ_TIMEOUT_S:.0f} s (frozen)"
        ordered = sorted(self.latencies) or [float("inf")]
        return (
            f"Metadata p99 {self.p99 * 1000:.1f} ms, median {ordered[len(ordered) // 2] * 1000:.1f} ms, "
            f"max {ordered[-1] * 1000:.1f} ms over {len(self.latencies)} requests; "
            f"answers per attacker {self.answered}"
        )


async def attack_and_probe(port: int, attack: Attack) -> Window:
    """Run the attackers and the probe for :data:`ATTACK_S` on fresh connections."""
    attackers = [await Client.connect(port) for _ in range(ATTACKERS)]
    probe = await Client.connect(port)
    window = Window([], [0] * ATTACKERS)
    deadline = time.monotonic() + ATTACK_S

    async def attacker(index: int) -> None:
        n = 0
        response = None
        while time.monotonic() < deadline and not window.frozen:
            sent = time.monotonic()
            api_key, version, values = attack(index, n, response)
            try:
                response = await attackers[index].request(api_key, version, values)
            except TimeoutError:
                window.frozen = True
                return
            assert response.error_code is ErrorCode.none, response
            window.answered[index] += 1
            n += 1
            # Pacing, not synchronisation: at most one request per PACE_S on each connection.
            await asyncio.sleep(max(0.0, sent + PACE_S - time.monotonic()))

    async def prober() -> None:
        while time.monotonic() < deadline and not window.frozen:
            started = time.perf_counter()
            try:
                response = await probe.request(ApiKey.METADATA, 12, METADATA)
            except TimeoutError:
                window.frozen = True
                return
            window.latencies.append(time.perf_counter() - started)
            assert {t.name for t in response.topics} >= {SLOW_NAME, MATCHING_NAME}

    try:
        await asyncio.gather(*(attacker(i) for i in range(ATTACKERS)), prober())
    finally:
        for client in (*attackers, probe):
            client.writer.close()
    return window


@pytest.mark.parametrize(
    ("attack", "setup"),
    [
        pytest.param(heartbeat, no_setup, id="consumer-group-heartbeat"),
        pytest.param(list_transactions, init_transactional_ids, id="list-transactions"),
    ],
)
def test_a_pathological_regex_on_ten_connections_leaves_metadata_p99_under_50ms(
    broker: BrokerProcess,
    attack: Attack,
    setup: Callable[[int], Awaitable[None]],
) -> None:
    """Up to :data:`ATTEMPTS` windows, passing at the first whose p99 is under the limit: on a
    machine shared with other work a window can lose its tail to the scheduler, while a broker
    that evaluates the regex on its loop freezes for seconds in every window (and the first
    freeze ends the test)."""

    async def main() -> list[Window]:
        await setup(broker.port)
        warm = await Client.connect(broker.port)
        try:
            await warm_up(warm)
        finally:
            await warm.close()
        windows: list[Window] = []
        while len(windows) < ATTEMPTS:
            window = await attack_and_probe(broker.port, attack)
            windows.append(window)
            if window.passed() or window.frozen:
                break
        return windows

    windows = asyncio.run(main())
    report = "; ".join(f"window {i + 1}: {w.describe()}" for i, w in enumerate(windows))
    print(report)
    assert windows[-1].passed(), report
