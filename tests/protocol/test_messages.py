"""The typed seam between handlers and kio: generated messages, request views, refused misspellings."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from kompakt.broker.context import Broker, HandlerSpec, RequestContext
from kompakt.broker.dispatch import HANDLERS, Dispatcher
from kompakt.protocol import codec, messages_gen
from kompakt.protocol.apis import ApiKey
from kompakt.protocol.messages import create_topics, fetch, find_coordinator
from tests.support.wire import call, request_frame

FETCH = {
    "replica_id": -1,
    "max_wait": 0,
    "min_bytes": 1,
    "max_bytes": 1024,
    "isolation_level": 0,
    "topics": [
        {
            "topic": "t",
            "partitions": [
                {
                    "partition": 0,
                    "fetch_offset": 5,
                    "partition_max_bytes": 1024,
                    "current_leader_epoch": 3,
                    "last_fetched_epoch": 2,
                    "log_start_offset": 1,
                }
            ],
        }
    ],
    "forgotten_topics_data": [],
    "rack_id": "rack-a",
}


def test_a_misspelt_response_key_is_refused_not_dropped() -> None:
    """A mapping key that no version of the message has used to vanish: ``error_mesage`` left
    ``error_message`` null on the wire and nothing complained."""
    response_class = codec.response_class(ApiKey.CREATE_PARTITIONS, 3)
    misspelt = {"results": [{"name": "t", "error_code": 37, "error_mesage": "too few partitions"}]}
    with pytest.raises(
        ValueError, match="no field 'error_mesage' in any version.*did you mean 'error_message'"
    ):
        codec.build(response_class, misspelt)


def test_a_key_of_another_version_is_dropped() -> None:
    """One mapping still serves every version: v0 has no ``error_message``, v1+ do."""
    values = {"error_code": 15, "error_message": "no coordinator", "node_id": -1, "host": "", "port": -1}
    v0 = codec.build(codec.response_class(ApiKey.FIND_COORDINATOR, 0), values)
    assert v0.error_code == codec.ErrorCode.coordinator_not_available


def test_a_misspelt_message_field_is_refused_when_built() -> None:
    with pytest.raises(TypeError, match="error_mesage"):
        create_topics.CreatableTopicResult(name="t", error_code=0, error_mesage="x")  # type: ignore[call-arg]
    result = create_topics.CreatableTopicResult(name="t", error_code=0)
    with pytest.raises(AttributeError):
        result.error_mesage = "x"  # type: ignore[attr-defined]


def test_mypy_refuses_a_misspelt_message_field(tmp_path: Path) -> None:
    """The point of the generated classes: the mistake is found before anything runs."""
    mypy_api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        "from kompakt.protocol.messages import create_topics as m\n"
        'm.CreatableTopicResult(name="t", error_code=0, error_mesage="x")\n'
    )
    out, _, status = mypy_api.run(
        [str(snippet), "--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache")]
    )
    assert status == 1
    assert 'Unexpected keyword argument "error_mesage"' in out


@pytest.mark.parametrize(("version", "node_id"), [(0, 7), (3, 7)])
def test_a_field_some_versions_require_is_refused_where_required(version: int, node_id: int) -> None:
    cls = codec.response_class(ApiKey.FIND_COORDINATOR, version)
    coordinators = find_coordinator.FindCoordinatorResponse(coordinators=[])
    with pytest.raises(ValueError, match="needs field 'error_code'"):
        codec.from_message(coordinators, cls)
    one = find_coordinator.FindCoordinatorResponse(error_code=0, node_id=node_id, host="h", port=1)
    assert codec.from_message(one, cls).node_id == node_id  # type: ignore[attr-defined]
    batched = codec.from_message(coordinators, codec.response_class(ApiKey.FIND_COORDINATOR, 4))
    assert batched.coordinators == ()  # type: ignore[attr-defined]


def test_the_newest_request_is_its_own_view() -> None:
    body = codec.build(codec.request_class(ApiKey.FETCH, 12), FETCH)
    assert codec.request_view(body, fetch.FetchRequest) is body


def test_an_older_request_reads_the_values_kafka_assumes() -> None:
    """Fetch v4 has no sessions, epochs, log start offset or rack: the view holds Kafka's defaults."""
    body = codec.build(codec.request_class(ApiKey.FETCH, 4), FETCH)
    view: Any = codec.request_view(body, fetch.FetchRequest)
    assert (view.session_id, view.session_epoch, view.forgotten_topics_data, view.rack_id) == (0, -1, (), "")
    assert view.max_wait == datetime.timedelta(0) and view.cluster_id is None
    partition = view.topics[0].partitions[0]
    assert (partition.partition, partition.fetch_offset, partition.partition_max_bytes) == (0, 5, 1024)
    assert (partition.current_leader_epoch, partition.last_fetched_epoch, partition.log_start_offset) == (
        -1,
        -1,
        -1,
    )


def test_every_message_module_is_what_the_generator_writes() -> None:
    """The modules match kio and the handler table: regenerate after changing either."""
    for key, spec in HANDLERS.items():
        assert messages_gen.module_path(key).read_text() == messages_gen.render(key, spec.versions), (
            f"run python -m kompakt.protocol.messages_gen {codec.api_name(key)} "
            f"{spec.min_version} {spec.max_version}"
        )
    written = {path.name for path in messages_gen.PACKAGE_DIR.glob("*.py")} - {"__init__.py"}
    assert written == {messages_gen.module_path(key).name for key in HANDLERS}
    assert messages_gen.recorded_versions() == {key: spec.versions for key, spec in HANDLERS.items()}


def test_a_handler_beyond_its_messages_is_refused() -> None:
    def metadata(ctx: RequestContext, request: object) -> None:
        return None

    table = dict(HANDLERS)
    table[ApiKey.METADATA] = HandlerSpec(ApiKey.METADATA, 0, 13, metadata)
    with pytest.raises(ValueError, match="v0-13 has no typed view"):
        Dispatcher(Broker.create(), table)


def test_a_typed_handler_answers_every_version_through_the_dispatcher() -> None:
    """The dispatcher hands the view in and builds each version's kio class from the message."""
    seen: list[tuple[int, str]] = []

    def handle(ctx: RequestContext, request: find_coordinator.FindCoordinatorRequest) -> Any:
        seen.append((ctx.api_version, request.key or ",".join(request.coordinator_keys)))
        coordinator = find_coordinator.Coordinator(key="k", node_id=9, host="h", port=2, error_code=0)
        return find_coordinator.FindCoordinatorResponse(
            coordinators=[coordinator], error_code=0, node_id=9, host="h", port=2
        )

    table = dict(HANDLERS)
    table[ApiKey.FIND_COORDINATOR] = HandlerSpec(ApiKey.FIND_COORDINATOR, 0, 4, handle)
    dispatcher = Dispatcher(Broker.create(), table)
    values = {"key": "g", "coordinator_keys": ["g", "h"]}
    assert [call(dispatcher, ApiKey.FIND_COORDINATOR, v, values).node_id for v in range(4)] == [9] * 4
    assert call(dispatcher, ApiKey.FIND_COORDINATOR, 4, values).coordinators[0].node_id == 9
    assert seen == [(0, "g"), (1, "g"), (2, "g"), (3, "g"), (4, "g,h")]
    assert dispatcher.decode(request_frame(ApiKey.FIND_COORDINATOR, 4, values)).api_version == 4


def test_an_answer_that_is_not_a_message_is_refused() -> None:
    """Every handler answers with its API's typed message; kio's classes or mappings would bypass
    the checks, so the dispatcher does not take them."""

    def untyped(ctx: RequestContext, request: object) -> Any:
        return codec.build(codec.response_class(ApiKey.HEARTBEAT, 4), {"error_code": 0})

    table = dict(HANDLERS)
    table[ApiKey.HEARTBEAT] = HandlerSpec(ApiKey.HEARTBEAT, 0, 4, untyped)
    dispatcher = Dispatcher(Broker.create(), table)
    request = dispatcher.decode(
        request_frame(ApiKey.HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"})
    )
    with pytest.raises(TypeError, match="not its API's response message"):
        dispatcher.call(dispatcher.context(request, "127.0.0.1"), request.body)
