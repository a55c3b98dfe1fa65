"""The broker state handlers see, the per-request context, and the handler registration record.

The broker state is deliberately small and explicit: identity and advertised listener, the clock,
the group coordinator and a narrow view of the log manager. Handlers get everything through
:class:`RequestContext`; nothing is global.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias

from kompakt.broker.deferred import Deferred
from kompakt.broker.groups import GroupConfig, GroupCoordinator, InMemoryOffsetStore, OffsetStore
from kompakt.clock import Clock, SystemClock
from kompakt.protocol.apis import VersionRange
from kompakt.protocol.codec import RequestPayload, ResponsePayload


class PartitionCatalog(Protocol):
    """The slice of the log manager the group handlers need; storage handlers will widen it.

    OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist, as Kafka does.
    """

    def partition_exists(self, topic: str, partition: int) -> bool: ...


@dataclass(slots=True, kw_only=True)
class Broker:
    """Everything the handlers share. One per process.

    ``advertised_host``/``advertised_port`` are what FindCoordinator (and later Metadata) hand out; the
    server fills the port in after binding when it was 0.
    """

    clock: Clock
    groups: GroupCoordinator
    node_id: int = 0
    cluster_id: str = "kompakt"
    advertised_host: str = "localhost"
    advertised_port: int = 9092
    log_manager: PartitionCatalog | None = None

    @classmethod
    def create(
        cls,
        *,
        clock: Clock | None = None,
        group_config: GroupConfig | None = None,
        offsets: OffsetStore | None = None,
        log_manager: PartitionCatalog | None = None,
        node_id: int = 0,
        advertised_host: str = "localhost",
        advertised_port: int = 9092,
    ) -> Broker:
        """A broker with defaults for whatever is not given (in-memory offsets, system clock)."""
        clock = clock or SystemClock()
        coordinator = GroupCoordinator(group_config or GroupConfig(), clock, offsets or InMemoryOffsetStore())
        return cls(
            clock=clock,
            groups=coordinator,
            node_id=node_id,
            advertised_host=advertised_host,
            advertised_port=advertised_port,
            log_manager=log_manager,
        )


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    #: The advertised ranges (from the handler table), for ApiVersions.
    api_versions: Mapping[int, VersionRange] = field(default_factory=dict)


#: A handler's answer: a response now, a response later, or none at all (Produce with acks=0).
HandlerResult: TypeAlias = ResponsePayload | Deferred[ResponsePayload] | None
Handler: TypeAlias = Callable[[RequestContext, RequestPayload], HandlerResult]


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    """One API the broker serves. Each handler module exposes one as ``SPEC``.

    ``blocking`` handlers (storage I/O) are run by the server in a worker thread.
    """

    api_key: int
    min_version: int
    max_version: int
    handler: Handler
    blocking: bool = False

    @property
    def versions(self) -> VersionRange:
        return VersionRange(self.min_version, self.max_version)
