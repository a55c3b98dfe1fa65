"""Every handler at every advertised version, bytes in -> bytes out, through the dispatcher."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from kompakt.broker.context import Broker, HandlerSpec, RequestContext
from kompakt.broker.deferred import Deferred
from kompakt.broker.dispatch import HANDLERS, Dispatcher
from kompakt.protocol import codec
from kompakt.protocol.apis import ApiKey
from tests.support.wire import chunks_to_frame, request_frame

TIER_1_GROUP_APIS = {
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
}

# The tier-1 matrix of the reference, exactly: ApiVersions advertises this and nothing else.
TIER_1_APIS = {
    **TIER_1_GROUP_APIS,
    ApiKey.METADATA: (0, 12),
    ApiKey.PRODUCE: (3, 12),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    # transactions (issue 15): Kafka 4.1's ranges, less the transaction.version 2 ones
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.UPDATE_FEATURES: (0, 2),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 2),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    # SASL and SCRAM credential administration (issue 27): Kafka 4.1's ranges
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    # ACLs (issue 27): Kafka 4.1's ranges (v0 went with KIP-896)
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
}

TOPICS = [{"name": "t", "partition_indexes": [0]}]

REQUESTS: dict[int, Mapping[str, object]] = {
    ApiKey.API_VERSIONS: {"client_software_name": "test", "client_software_version": "1.0"},
    ApiKey.FIND_COORDINATOR: {"key": "g", "key_type": 0, "coordinator_keys": ["g", "h"]},
    ApiKey.JOIN_GROUP: {
        "group_id": "g",
        "session_timeout": 10_000,
        "rebalance_timeout": 10_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"meta"}],
    },
    ApiKey.SYNC_GROUP: {"group_id": "g", "generation_id": 1, "member_id": "nobody", "assignments": []},
    ApiKey.HEARTBEAT: {"group_id": "g", "generation_id": 1, "member_id": "nobody"},
    ApiKey.LEAVE_GROUP: {"group_id": "g", "member_id": "nobody", "members": [{"member_id": "nobody"}]},
    ApiKey.OFFSET_COMMIT: {
        "group_id": "g",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "retention_time": -1,
        "topics": [
            {
                "name": "t",
                "partitions": [{"partition_index": 0, "committed_offset": 42, "committed_metadata": "m"}],
            }
        ],
    },
    ApiKey.OFFSET_FETCH: {"group_id": "g", "topics": TOPICS, "groups": [{"group_id": "g", "topics": TOPICS}]},
    ApiKey.DESCRIBE_GROUPS: {"groups": ["g"], "include_authorized_operations": False},
    ApiKey.LIST_GROUPS: {"states_filter": []},
    ApiKey.DELETE_GROUPS: {"groups_names": ["g"]},
    ApiKey.OFFSET_DELETE: {
        "group_id": "g",
        "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}],
    },
    ApiKey.CONSUMER_GROUP_HEARTBEAT: {
        "group_id": "kip848",
        "member_id": "m",
        "member_epoch": 0,
        "rebalance_timeout": 30_000,
        "subscribed_topic_names": ["t"],
        "topic_partitions": [],
    },
    ApiKey.CONSUMER_GROUP_DESCRIBE: {"group_ids": ["kip848"], "include_authorized_operations": False},
}


def roundtrip(dispatcher: Dispatcher, key: int, version: int, values: Mapping[str, object]) -> object:
    request = dispatcher.decode(request_frame(key, version, values, correlation_id=321))
    ctx = dispatcher.context(request, "127.0.0.1")
    result = dispatcher.call(ctx, request.body)
    if isinstance(result, Deferred):
        assert result.done, "a lone JoinGroup with no initial delay completes at once"
        result = result.result()
    assert result is not None
    correlation_id, response = codec.decode_response(
        chunks_to_frame(codec.encode_response(request.correlation_id, result)), key, version
    )
    assert correlation_id == 321
    return response


def test_handler_table_is_the_tier_1_group_matrix() -> None:
    assert {key: (s.min_version, s.max_version) for key, s in HANDLERS.items()} == TIER_1_APIS


def all_versions() -> list[tuple[int, int]]:
    return [(k, v) for k, (lo, hi) in TIER_1_GROUP_APIS.items() for v in range(lo, hi + 1)]


@pytest.mark.parametrize(("key", "version"), all_versions())
def test_every_handler_answers_every_version(dispatcher: Dispatcher, key: int, version: int) -> None:
    response = roundtrip(dispatcher, key, version, REQUESTS[key])
    assert response.__api_key__ == key  # type: ignore[attr-defined]
    assert response.__version__ == version  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", range(5))
def test_api_versions_lists_exactly_the_handler_table(dispatcher: Dispatcher, version: int) -> None:
    response = roundtrip(dispatcher, ApiKey.API_VERSIONS, version, REQUESTS[ApiKey.API_VERSIONS])
    listed = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}  # type: ignore[attr-defined]
    assert listed == TIER_1_APIS


def test_api_versions_is_derived_from_a_custom_table() -> None:
    def produce(ctx: RequestContext, request: codec.RequestPayload) -> None:
        return None

    table = dict(HANDLERS)
    table[ApiKey.PRODUCE] = HandlerSpec(ApiKey.PRODUCE, 3, 9, produce, blocking=True)
    dispatcher = Dispatcher(Broker.create(), table)
    response = roundtrip(dispatcher, ApiKey.API_VERSIONS, 3, REQUESTS[ApiKey.API_VERSIONS])
    listed = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}  # type: ignore[attr-defined]
    assert listed[ApiKey.PRODUCE] == (3, 9)
    request = dispatcher.decode(request_frame(ApiKey.API_VERSIONS, 0, {}))
    assert dispatcher.call(dispatcher.context(request, "h"), request.body) is not None


def test_api_versions_above_4_gets_the_v0_fallback(dispatcher: Dispatcher) -> None:
    frame = (18).to_bytes(2, "big") + (5).to_bytes(2, "big") + (66).to_bytes(4, "big") + b"\x00\x00junk"
    with pytest.raises(codec.UnsupportedVersion) as info:
        dispatcher.decode(frame)
    chunks = dispatcher.refuse(info.value)
    assert chunks is not None
    correlation_id, response = codec.decode_response(chunks_to_frame(chunks), 18, 0)
    assert correlation_id == 66
    assert response.error_code == codec.ErrorCode.unsupported_version  # type: ignore[union-attr]
    assert {k.api_key for k in response.api_keys} == set(TIER_1_APIS)  # type: ignore[union-attr]


def test_unserved_api_without_error_code_is_not_answered(dispatcher: Dispatcher) -> None:
    error = codec.UnsupportedVersion(ApiKey.METADATA, 12, 1)
    assert dispatcher.refuse(error) is None


@pytest.mark.parametrize("version", range(4))
def test_find_coordinator_points_at_this_broker(dispatcher: Dispatcher, version: int) -> None:
    response = roundtrip(dispatcher, ApiKey.FIND_COORDINATOR, version, REQUESTS[ApiKey.FIND_COORDINATOR])
    assert response.error_code == codec.ErrorCode.none  # type: ignore[attr-defined]
    assert (response.node_id, response.host, response.port) == (0, "broker.test", 19092)  # type: ignore[attr-defined]


def test_find_coordinator_v4_batches_keys(dispatcher: Dispatcher) -> None:
    response = roundtrip(dispatcher, ApiKey.FIND_COORDINATOR, 4, REQUESTS[ApiKey.FIND_COORDINATOR])
    assert [(c.key, c.host, c.port) for c in response.coordinators] == [  # type: ignore[attr-defined]
        ("g", "broker.test", 19092),
        ("h", "broker.test", 19092),
    ]


@pytest.mark.parametrize("version", [1, 3, 4])
def test_find_coordinator_without_a_transaction_coordinator(dispatcher: Dispatcher, version: int) -> None:
    """A storage-less broker has no transaction coordinator: retriable COORDINATOR_NOT_AVAILABLE
    (a broker with storage answers itself, see tests/broker/test_txn_handlers.py)."""
    values = {"key": "txn", "key_type": 1, "coordinator_keys": ["txn"]}
    response = roundtrip(dispatcher, ApiKey.FIND_COORDINATOR, version, values)
    error = response.coordinators[0].error_code if version >= 4 else response.error_code  # type: ignore[attr-defined]
    assert error == codec.ErrorCode.coordinator_not_available
