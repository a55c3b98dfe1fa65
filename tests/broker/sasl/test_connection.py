"""SASL on a real socket: a SASL_PLAINTEXT listener's connection is gated until authentication,
closed after a failed one (the failure response still arrives), and closed when an expired
session sends anything but a re-authentication."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kompakt.broker.context import Broker
from kompakt.broker.dispatch import Dispatcher
from kompakt.clock import FakeClock
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.codec import ErrorCode as E
from kompakt.server.connection import Connection, connection_factory
from kompakt.server.listener import Listener
from tests.broker.sasl.test_handlers import NOW_MS, make_broker
from tests.support.wire import read_frame, request_bytes

TIMEOUT_S = 10.0
METADATA = {
    "topics": None,
    "allow_auto_topic_creation": False,
    "include_cluster_authorized_operations": False,
    "include_topic_authorized_operations": False,
}


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.next_id = reader, writer, 0

    async def request(self, api_key: int, version: int, values: dict[str, object]) -> Any:
        self.next_id += 1
        self.writer.write(request_bytes(api_key, version, values, self.next_id))
        correlation_id, response = codec.decode_response(
            await read_frame(self.reader, TIMEOUT_S), api_key, version
        )
        assert correlation_id == self.next_id
        return response

    async def closed_by_server(self) -> bool:
        """True once the server has closed the connection (EOF), within the deadline."""
        return await asyncio.wait_for(self.reader.read(1), TIMEOUT_S) == b""


def with_sasl_listener(
    tmp_path: Path, clock: FakeClock, scenario: Callable[[Client, Broker], Awaitable[None]]
) -> None:
    async def main() -> None:
        broker, manager = make_broker(tmp_path / "data", clock)
        connections: set[Connection] = set()
        listener = await Listener.bind("127.0.0.1", 0, "kafka")
        await listener.serve_protocol(
            connection_factory(
                Dispatcher(broker),
                1 << 20,
                connections,
                listener_name="SASL_PLAINTEXT",
                security_protocol="SASL_PLAINTEXT",
            )
        )
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        try:
            await asyncio.wait_for(scenario(Client(reader, writer), broker), 30)
        finally:
            writer.close()
            listener.close()
            await listener.wait_closed()
            for connection in list(connections):
                connection.stop()
            manager.close()

    asyncio.run(main())


def test_a_request_before_authentication_closes_the_connection(tmp_path: Path) -> None:
    async def scenario(client: Client, broker: Broker) -> None:
        versions = await client.request(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert advertised[ApiKey.SASL_HANDSHAKE] == (0, 1)
        assert advertised[ApiKey.SASL_AUTHENTICATE] == (0, 2)
        assert advertised[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS] == (0, 0)
        assert advertised[ApiKey.ALTER_USER_SCRAM_CREDENTIALS] == (0, 0)
        client.writer.write(request_bytes(ApiKey.METADATA, 9, METADATA, 99))
        assert await client.closed_by_server()

    with_sasl_listener(tmp_path, FakeClock(NOW_MS), scenario)


def test_plain_login_then_requests_are_served(tmp_path: Path) -> None:
    async def scenario(client: Client, broker: Broker) -> None:
        assert (await client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})).error_code == E.none
        response = await client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0alice-secret"})
        assert response.error_code == E.none
        metadata = await client.request(ApiKey.METADATA, 9, METADATA)
        assert [b.node_id for b in metadata.brokers] == [broker.node_id]

    with_sasl_listener(tmp_path, FakeClock(NOW_MS), scenario)


def test_wrong_password_answers_then_closes(tmp_path: Path) -> None:
    async def scenario(client: Client, broker: Broker) -> None:
        await client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        response = await client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0wrong"})
        assert response.error_code == E.sasl_authentication_failed
        assert response.error_message == "Authentication failed: Invalid username or password"
        assert await client.closed_by_server()

    with_sasl_listener(tmp_path, FakeClock(NOW_MS), scenario)


def test_expired_session_closes_on_a_request_that_is_not_a_reauthentication(tmp_path: Path) -> None:
    clock = FakeClock(NOW_MS)

    async def scenario(client: Client, broker: Broker) -> None:
        await client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        response = await client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0alice-secret"})
        assert response.session_lifetime.total_seconds() == 60
        await client.request(ApiKey.METADATA, 9, METADATA)
        clock.advance(59_000)
        await client.request(ApiKey.METADATA, 9, METADATA)
        clock.advance(1_000)
        # Re-authenticating keeps the connection...
        assert (await client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})).error_code == E.none
        response = await client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0alice-secret"})
        assert response.error_code == E.none
        await client.request(ApiKey.METADATA, 9, METADATA)
        # ...anything else after the next expiry closes it.
        clock.advance(60_000)
        client.writer.write(request_bytes(ApiKey.METADATA, 9, METADATA, 50))
        assert await client.closed_by_server()

    with_sasl_listener(tmp_path, clock, scenario)


def test_a_frame_above_the_sasl_receive_limit_closes_an_unauthenticated_connection(tmp_path: Path) -> None:
    """Kafka's ``sasl.server.max.receive.size`` (512 KiB): before authentication a larger size
    prefix closes the connection without the broker reading (or buffering) the frame."""

    async def scenario(client: Client, broker: Broker) -> None:
        client.writer.write(struct.pack(">i", 524_289))
        assert await client.closed_by_server()

    with_sasl_listener(tmp_path, FakeClock(NOW_MS), scenario)


def test_after_authentication_the_listener_limit_applies(tmp_path: Path) -> None:
    async def scenario(client: Client, broker: Broker) -> None:
        await client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        await client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0alice-secret"})
        big = {**METADATA, "topics": [{"name": "t" * 200, "topic_id": None}] * 3000}  # ~600 kB
        response = await client.request(ApiKey.METADATA, 9, big)
        assert len(response.topics) >= 1

    with_sasl_listener(tmp_path, FakeClock(NOW_MS), scenario)
