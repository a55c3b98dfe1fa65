"""``GroupCoordinator``: every group of the broker, classic or consumer, and their offsets (Kafka's
``GroupCoordinatorService`` and ``GroupCoordinatorShard`` in one, for a single broker).

The coordinator routes each request by the type of the group it names (one namespace of group ids;
an id is one type at a time) to a manager that decides and returns a
:class:`~kompakt.broker.groups.result.Result`:

* :class:`~kompakt.broker.groups.classic.membership.ClassicMembership`: JoinGroup, SyncGroup,
  Heartbeat and LeaveGroup of classic groups;
* :class:`~kompakt.broker.groups.consumer.membership.ConsumerMembership`: ConsumerGroupHeartbeat
  and the classic members of consumer groups (KIP-848's online migration);
* :class:`~kompakt.broker.groups.offsets.OffsetManager`: committed offsets of both.

Every operation then runs the same way, Kafka's "records, append, replay": the coordinator appends
the result's records to ``__consumer_offsets`` as one batch (:class:`GroupLog`), replays them into
the managers, and calls the result's ``then``. The replay is the only place the state the log
describes changes, and the same replay rebuilds it at startup (:meth:`GroupCoordinator.load`).
Only this module appends. Converting a group between the two protocols is one operation too: one
type's tombstones and the other's records in one batch (:mod:`kompakt.broker.groups.migration`).

Timers (classic sessions, joins and syncs; consumer sessions, revocations, classic members' joins
and syncs) are due-checked at the start of every entry point, so a request sees the groups as of
its arrival, as if Kafka's timer thread had run: a member whose session expired is gone before
DeleteGroups decides "group is not empty". The server also calls :meth:`GroupCoordinator.tick`
periodically. Group errors the managers raise become error codes here, as Kafka's service turns
exceptions into response codes.

Thread-safe: one lock serialises the operations (the handlers run on the event loop,
TxnOffsetCommit in a worker thread, the log cleaner reads committed offsets from its threads).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from kompakt.broker.deferred import Deferred
from kompakt.broker.error_codes import error_code_for
from kompakt.broker.groups import migration
from kompakt.broker.groups.classic.group import (
    CLASSIC_GROUP_TYPE,
    ClassicGroup,
    GroupState,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from kompakt.broker.groups.classic.membership import ClassicMembership, GroupDescription
from kompakt.broker.groups.config import ConsumerGroupConfig, GroupConfig
from kompakt.broker.groups.consumer.group import ConsumerGroupState
from kompakt.broker.groups.consumer.heartbeat import HeartbeatRequest, HeartbeatResult, TopicView
from kompakt.broker.groups.consumer.membership import ClassicJoin, ConsumerMembership, DescribedConsumerGroup
from kompakt.broker.groups.errors import (
    GroupError,
    GroupIdNotFoundError,
    NonEmptyGroupError,
    UnknownMemberIdError,
)
from kompakt.broker.groups.offsets import OffsetCommitEntry
from kompakt.broker.groups.offsets import OffsetManager as OffsetManager
from kompakt.broker.groups.records.log import GroupLog, TxnMarker
from kompakt.broker.groups.records.schemas import (
    CommittedOffset,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecordKey,
    GroupRecordValue,
    OffsetCommitKey,
)
from kompakt.broker.groups.result import Producer, Result, append_error_code, chain
from kompakt.broker.groups.timer import KeyedTimer
from kompakt.clock import Clock
from kompakt.protocol.codec import ErrorCode

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    #: ListGroups v5 (KIP-848): "classic" or "consumer".
    group_type: str = CLASSIC_GROUP_TYPE


class GroupCoordinator:
    """See the module docstring."""

    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        group_log: GroupLog,
        consumer_config: ConsumerGroupConfig | None = None,
        *,
        topics: TopicView | None = None,
    ) -> None:
        self.config = config
        self._clock = clock
        self._log = group_log
        self._lock = threading.RLock()
        self._timer = KeyedTimer()
        self._next_offset_expiry_ms: float | None = None
        #: Whether :meth:`tick` runs the periodic offset expiry (off when the server schedules it).
        self.expire_on_tick = True
        self.offsets = OffsetManager(config.offset_metadata_max_bytes)
        self.classic = ClassicMembership(config, clock, self._timer)
        self.consumer = ConsumerMembership(
            consumer_config or ConsumerGroupConfig(),
            clock,
            topics=topics,
            classic_max_size=config.group_max_size,
        )

    # -- records: append, replay, load -------------------------------------------------------------

    def load(self) -> None:
        """Replay ``__consumer_offsets`` from its start (before the broker answers a group request)."""
        with self._lock:
            for item in self._log.load():
                if isinstance(item, TxnMarker):
                    self.offsets.replay_marker(
                        item.partition, item.producer_id, item.committed, self._log.partition_of
                    )
                else:
                    self._replay(item.key, item.value, item.producer_id, loading=True)
            self.classic.on_loaded()
            self.consumer.on_loaded()

    def _replay(
        self,
        key: GroupRecordKey,
        value: GroupRecordValue | None,
        producer_id: int | None = None,
        *,
        loading: bool = False,
    ) -> None:
        if isinstance(key, OffsetCommitKey):
            assert value is None or isinstance(value, CommittedOffset)
            self.offsets.replay(key, value, producer_id)
        elif isinstance(key, GroupMetadataKey):
            assert value is None or isinstance(value, GroupMetadataValue)
            self.classic.replay(key, value, loading=loading)
        else:
            assert not isinstance(value, (CommittedOffset, GroupMetadataValue))
            self.consumer.replay(key, value)

    def _apply(self, result: Result[T]) -> T:
        """Append the result's records as one batch, replay them, then run its ``then``.

        A failed append changes nothing; the result's ``then`` hears of it, and unless it answers
        the failure itself (a classic member's parked request), the error is raised to the caller.
        """
        if result.records:
            try:
                self._log.append(result.records, result.producer)
            except Exception as exc:
                if result.then is not None:
                    result.then(exc)
                if not result.answers_failure:
                    raise
                log.warning("could not write %d group records: %s", len(result.records), exc)
                self._apply_spilled()
                return result.value
            producer_id = result.producer.producer_id if result.producer is not None else None
            for key, value in result.records:
                self._replay(key, value, producer_id)
        if result.then is not None:
            result.then(None)
        for note in result.converted:
            self._apply(self.classic.adopt_downgraded(note))
        self._apply_spilled()
        return result.value

    def _apply_spilled(self) -> None:
        spilled = self.classic.take_spilled()
        if spilled.records or spilled.then is not None:
            self._apply(spilled)

    def _run_due(self) -> None:
        """Fire the due timers of both group types: before a request, so it sees the groups as of
        its arrival; after it, for what it scheduled "now". A failed write is logged: the timer's
        decision waits for the next run."""
        for manager in (self.classic, self.consumer):
            try:
                self._apply(manager.run_due())
            except Exception:
                log.exception("group timers failed")

    @contextmanager
    def _entry(self) -> Iterator[None]:
        """One entry point: serialised, with the due timers run before and after it."""
        with self._lock:
            self._run_due()
            try:
                yield
            finally:
                self._run_due()

    def tick(self, now_ms: float) -> None:
        """Fire due timers (sessions, rebalance and sync timeouts), and expire old offsets."""
        with self._lock:
            self._run_due()
            if not self.expire_on_tick:
                return
            if self._next_offset_expiry_ms is None:
                self._next_offset_expiry_ms = now_ms + self.config.offsets_retention_check_interval_ms
            elif now_ms >= self._next_offset_expiry_ms:
                self._next_offset_expiry_ms = now_ms + self.config.offsets_retention_check_interval_ms
                self.expire_offsets()

    # -- lookups -----------------------------------------------------------------------------------

    def group(self, group_id: str) -> ClassicGroup | None:
        """The live classic group (tests and diagnostics read it)."""
        return self.classic.group(group_id)

    def exists(self, group_id: str) -> bool:
        """Whether a group of either type, or committed offsets, exist under this id."""
        return (
            self.classic.has_group(group_id)
            or self.consumer.has_group(group_id)
            or self.offsets.has_offsets(group_id)
        )

    def topic_names(self) -> dict[uuid.UUID, str]:
        """Topic id -> name, for answers that name the topics of an assignment."""
        return {topic_id: name for name, (topic_id, _) in self.consumer.topics().items()}

    # -- classic protocol ----------------------------------------------------------------------------

    def join(self, request: JoinRequest) -> Deferred[JoinResult]:
        """JoinGroup: to the classic group of this id, or as a classic member of a non-empty consumer
        group (``classicGroupJoinToConsumerGroup``); an empty consumer group is deleted first and
        the id becomes a classic group (``classicGroupJoinToClassicGroup``)."""
        try:
            self.classic.check_join(request)
        except GroupError as exc:
            return Deferred.resolved(JoinResult(error_code_for(exc), member_id=request.member_id))
        with self._entry():
            try:
                group = self.consumer.group(request.group_id)
                if group is not None and not group.is_empty():
                    return self._apply(self.consumer.classic_join(group, _classic_join(request)))
                dropped = self.consumer.drop_if_empty(request.group_id)
                if dropped is not None:
                    self._apply(Result(None, dropped))
                return self._apply(self.classic.join(request))
            except GroupError as exc:
                return Deferred.resolved(JoinResult(error_code_for(exc), member_id=request.member_id))

    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
    ) -> Deferred[SyncResult]:
        with self._entry():
            try:
                group = self.consumer.group(group_id)
                if group is not None:
                    if group.is_empty():
                        raise UnknownMemberIdError(f"Group {group_id} is empty.")
                    return self._apply(
                        self.consumer.classic_sync(
                            group, member_id, group_instance_id, generation_id, protocol_type, protocol_name
                        )
                    )
                return self._apply(
                    self.classic.sync(
                        group_id,
                        generation_id,
                        member_id,
                        group_instance_id,
                        protocol_type,
                        protocol_name,
                        assignments,
                    )
                )
            except GroupError as exc:
                return Deferred.resolved(SyncResult(error_code_for(exc)))

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        with self._entry():
            try:
                group = self.consumer.group(group_id)
                if group is not None:
                    return self._apply(
                        self.consumer.classic_heartbeat(group, member_id, group_instance_id, generation_id)
                    )
                return self._apply(
                    self.classic.heartbeat(group_id, generation_id, member_id, group_instance_id)
                )
            except GroupError as exc:
                return error_code_for(exc)

    def leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """LeaveGroup: the group-level error and one error per ``(member_id, group_instance_id)``."""
        with self._entry():
            try:
                group = self.consumer.group(group_id)
                if group is not None:
                    return ErrorCode.none, self._apply(self.consumer.classic_leave(group, members))
                return ErrorCode.none, self._apply(self.classic.leave(group_id, members))
            except GroupError as exc:
                return error_code_for(exc), []

    # -- consumer protocol -------------------------------------------------------------------------

    def prepare_consumer_group_heartbeat(self, request: HeartbeatRequest) -> None:
        """Resolve the subscription regexes a ConsumerGroupHeartbeat will evaluate (its own and
        its group's members'), outside the lock: the handler calls this in a worker thread, so the
        heartbeat then finds them resolved and holds the lock only as long as a heartbeat without
        regexes. Never raises for an invalid regex; the heartbeat answers that."""
        with self._lock:
            patterns = self.consumer.subscription_regexes(request.group_id)
        if request.subscribed_topic_regex:
            patterns.add(request.subscribed_topic_regex)
        if patterns:
            self.consumer.resolve_regexes(patterns)

    def consumer_group_heartbeat(self, request: HeartbeatRequest, api_version: int) -> HeartbeatResult:
        """ConsumerGroupHeartbeat; raises a :class:`GroupError` for an error answer. A joining member
        turns a classic group of this id into a consumer group: an empty one is deleted, a live one
        converted with its members (KIP-848's online upgrade)."""
        with self._entry():
            self.consumer.validate(request, api_version)
            group_id = request.group_id
            if self.consumer.has_group(group_id) or not self.classic.has_group(group_id):
                return self._apply(self.consumer.heartbeat(request))
            if request.member_epoch != 0:
                raise GroupIdNotFoundError(f"Group {group_id} is not a consumer group.")
            dropped = self.classic.drop_if_empty(group_id)
            if dropped is not None:
                log.info("group %s: converted the empty classic group to a consumer group", group_id)
                result = self.consumer.heartbeat(request)
                return self._apply(Result(result.value, [*dropped, *result.records], result.then))
            return self._apply(self._upgrade(group_id, request))

    def _upgrade(self, group_id: str, request: HeartbeatRequest) -> Result[HeartbeatResult]:
        """``convertToConsumerGroup`` then the heartbeat, as one batch."""
        classic = self.classic.group(group_id)
        assert classic is not None
        migration.check_upgrade(classic, self.consumer.config)
        records, converted = migration.to_consumer_group(classic, self.consumer.topics())
        heartbeat = self.consumer.heartbeat(request, converted)
        self.classic.prepare_upgrade(group_id)
        log.info("group %s: converted the classic group to a consumer group", group_id)
        start = self.consumer.start_sessions(group_id, list(converted.members))
        return Result(heartbeat.value, [*records, *heartbeat.records], chain(start, heartbeat.then))

    def consumer_group_describe(self, group_id: str) -> DescribedConsumerGroup:
        """ConsumerGroupDescribe of one group; raises GroupIdNotFoundError for others."""
        with self._entry():
            if self.classic.has_group(group_id) and not self.consumer.has_group(group_id):
                raise GroupIdNotFoundError(f"Group {group_id} is not a consumer group.")
            return self.consumer.describe(group_id)

    # -- offsets -----------------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        entries: Sequence[OffsetCommitEntry],
        retention_ms: int | None = None,
        api_version: int = 8,
    ) -> list[ErrorCode]:
        """OffsetCommit: one error per entry, in order.

        Generation -1 with an empty group is a "simple" commit (a consumer using ``assign``); otherwise
        the member and generation (member epoch) must match the group's.
        """
        with self._entry():
            try:
                if self.consumer.has_group(group_id):
                    self.consumer.check_commit(group_id, member_id, generation_id, api_version)
                else:
                    self.classic.validate_offset_commit(group_id, generation_id, member_id, group_instance_id)
            except GroupError as exc:
                return [error_code_for(exc)] * len(entries)
            now_ms = self._clock.now_ms()
            expire_ts = now_ms + retention_ms if retention_ms is not None and retention_ms >= 0 else None
            result = self.offsets.commit(group_id, entries, now_ms, expire_ts)
            return self._apply_commit(group_id, result)

    def _apply_commit(self, group_id: str, result: Result[list[Exception | None]]) -> list[ErrorCode]:
        errors = [ErrorCode.none if e is None else error_code_for(e) for e in result.value]
        try:
            self._apply(result)
        except Exception:
            log.exception("group %s: could not store %d committed offsets", group_id, len(result.records))
            return [ErrorCode.unknown_server_error if e is ErrorCode.none else e for e in errors]
        return errors

    def validate_transactional_commit(
        self, group_id: str, generation_id: int, member_id: str, api_version: int
    ) -> ErrorCode:
        """``validateTransactionalOffsetCommit`` of the group's type: a consumer group checks the
        member epoch (the producer's consumer group metadata's generation), a classic group the
        generation."""
        with self._entry():
            try:
                if self.consumer.has_group(group_id):
                    self.consumer.check_commit(
                        group_id, member_id, generation_id, api_version, transactional=True
                    )
                else:
                    self.classic.validate_transactional_commit(group_id, generation_id, member_id)
            except GroupError as exc:
                return error_code_for(exc)
            return ErrorCode.none

    def commit_transactional_offsets(
        self, group_id: str, producer_id: int, producer_epoch: int, entries: Sequence[OffsetCommitEntry]
    ) -> list[ErrorCode]:
        """TxnOffsetCommit: the offsets go in a transactional batch of the producer and stay pending
        until its marker (:meth:`complete_transaction`); one error per entry."""
        with self._lock:
            producer = Producer(producer_id, producer_epoch)
            result = self.offsets.commit(group_id, entries, self._clock.now_ms(), producer=producer)
            return self._apply_commit(group_id, result)

    def complete_transaction(self, partition: int, producer_id: int, committed: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` reached ``__consumer_offsets``-``partition``."""
        with self._lock:
            self.offsets.replay_marker(partition, producer_id, committed, self._log.partition_of)

    def has_pending_transactional(self, group_id: str, topic: str, partition: int) -> bool:
        return self.offsets.has_pending_transactional(group_id, topic, partition)

    def partition_of(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition of ``group_id`` (AddOffsetsToTxn, TxnOffsetCommit)."""
        return self._log.partition_of(group_id)

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None
    ) -> list[tuple[str, int, CommittedOffset | None]]:
        """Committed offsets for ``partitions`` (``None`` means every partition the group committed)."""
        with self._entry():
            committed = self.offsets.fetch(group_id)
        if partitions is None:
            return [(topic, partition, entry) for (topic, partition), entry in sorted(committed.items())]
        return [(topic, partition, committed.get((topic, partition))) for topic, partition in partitions]

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> None:
        """``validateOffsetFetch`` (OffsetFetch v9+ names a consumer group's member and its epoch)."""
        with self._entry():
            self.consumer.check_fetch(group_id, member_id, member_epoch)

    def delete_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]
    ) -> tuple[ErrorCode, list[tuple[str, list[tuple[int, ErrorCode]]]]]:
        """OffsetDelete (KIP-496, ``OffsetMetadataManager.deleteOffsets``).

        The group must exist (GROUP_ID_NOT_FOUND) and be empty unless its members use the consumer
        protocol (NON_EMPTY_GROUP); a topic the members subscribe to answers
        GROUP_SUBSCRIBED_TO_TOPIC for each of its partitions and keeps its offsets. Returns the
        group-level error and, per topic, the error of each partition.
        """
        if not group_id:
            return ErrorCode.invalid_group_id, []
        with self._entry():
            if not self.exists(group_id):
                return ErrorCode.group_id_not_found, []
            try:
                self.classic.validate_offset_delete(group_id)
            except GroupError as exc:
                return error_code_for(exc), []
            results: list[tuple[str, list[tuple[int, ErrorCode]]]] = []
            doomed: list[tuple[str, int]] = []
            consumer_subscribed = self.consumer.subscribed_topics(group_id)
            for topic, partitions in topics:
                if topic in consumer_subscribed or self.classic.is_subscribed_to(group_id, topic):
                    results.append((topic, [(p, ErrorCode.group_subscribed_to_topic) for p in partitions]))
                    continue
                results.append((topic, [(p, ErrorCode.none) for p in partitions]))
                doomed.extend((topic, p) for p in partitions)
            if doomed:
                try:
                    self._apply(self.offsets.delete(group_id, doomed))
                except Exception as exc:  # noqa: BLE001 - answered as the group-level error
                    log.exception("group %s: could not delete %d offsets", group_id, len(doomed))
                    return append_error_code(exc), []
            return ErrorCode.none, results

    def on_topic_deleted(self, topic: str, partitions: Sequence[int]) -> None:
        """Tombstone every group's offsets of a deleted topic (the broker's topic-deletion hook)."""
        with self._lock:
            self._apply(self.offsets.delete_topic(topic, partitions))

    def expire_offsets(self) -> int:
        """Drop expired offsets of groups without members, and forget empty groups without offsets."""
        with self._lock:
            active = {g.group_id for g in self.classic.groups() if g.members}
            active |= {
                g
                for g in self.consumer.group_ids()
                if self.consumer.state_of(g) is not ConsumerGroupState.EMPTY
            }
            retention_ms = self.config.offsets_retention_ms
            removed = self._apply(self.offsets.expire(self._clock.now_ms(), retention_ms, active))
            with_offsets = self.offsets.groups()
            for group_id in self.consumer.group_ids():
                if group_id not in active and group_id not in with_offsets:
                    self._apply(Result(None, self.consumer.tombstones(group_id)))
            for group_id in self.classic.forgettable(with_offsets):
                self._apply(Result(None, [(GroupMetadataKey(group_id), None)]))
            return removed

    # -- administration ----------------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupDescription:
        """DescribeGroups: classic groups only; a consumer group is Dead here (Kafka answers so,
        GROUP_ID_NOT_FOUND from v6, for the group ConsumerGroupDescribe describes)."""
        with self._entry():
            description = self.classic.describe(group_id)
            if description is not None:
                return description
            if self.consumer.has_group(group_id):
                return GroupDescription(group_id, GroupState.DEAD.value, "", "", ())
            if self.offsets.has_offsets(group_id):
                return GroupDescription(group_id, GroupState.EMPTY.value, "", "", ())
            return GroupDescription(group_id, GroupState.DEAD.value, "", "", (), exists=False)

    def list_groups(self, states: Collection[str] = (), types: Collection[str] = ()) -> list[GroupListing]:
        """Every known group, filtered by state and by type (both case-insensitive, empty = all)."""
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        with self._entry():
            listings = {
                g.group_id: GroupListing(g.group_id, g.protocol_type or "", g.state.value, g.type)
                for g in self.classic.groups()
            }
            for group_id in self.consumer.group_ids():
                listings[group_id] = GroupListing(
                    group_id, "consumer", self.consumer.state_of(group_id).value, group_type="consumer"
                )
            for group_id in self.offsets.groups() - listings.keys():
                listings[group_id] = GroupListing(group_id, "", GroupState.EMPTY.value)
        return [
            listing
            for _, listing in sorted(listings.items())
            if (not wanted_states or listing.state.lower() in wanted_states)
            and (not wanted_types or listing.group_type in wanted_types)
        ]

    def delete_groups(self, group_ids: Sequence[str]) -> list[tuple[str, ErrorCode]]:
        """DeleteGroups: each empty group's records and offsets tombstoned, in one batch per group."""
        results = []
        with self._entry():
            for group_id in group_ids:
                results.append((group_id, self._delete_group(group_id)))
        return results

    def _delete_group(self, group_id: str) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        try:
            if self.consumer.has_group(group_id):
                records = self.consumer.tombstones(group_id)
            elif self.classic.has_group(group_id) or self.offsets.has_offsets(group_id):
                records = self.classic.tombstones(group_id)
            else:
                return ErrorCode.group_id_not_found
        except NonEmptyGroupError:
            return ErrorCode.non_empty_group
        except GroupError as exc:
            return error_code_for(exc)
        try:
            self._apply(Result(None, [*self.offsets.delete_all(group_id), *records]))
        except Exception as exc:  # noqa: BLE001 - answered as the group's error
            log.exception("group %s: could not delete it", group_id)
            return append_error_code(exc)
        return ErrorCode.none


def _classic_join(request: JoinRequest) -> ClassicJoin:
    return ClassicJoin(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=request.protocols,
        client_id=request.client_id,
        client_host=request.client_host,
        require_known_member_id=request.require_known_member_id and request.member_id == "",
    )
