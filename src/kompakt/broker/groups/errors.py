"""Errors of the group coordinators, one per Kafka ``ApiException`` they stand for.

The coordinator raises them where Kafka's ``GroupMetadataManager`` throws; the handlers turn them
into the response's error code through :func:`kompakt.broker.error_codes.error_code_for` and keep
the message as the response's ``error_message``, as Kafka's ``ApiError.fromThrowable`` does.
"""

from __future__ import annotations

from kompakt.errors import KompaktError


class GroupError(KompaktError):
    """Base of every error a group request can answer with."""


class InvalidGroupRequestError(GroupError):
    """INVALID_REQUEST: a field combination the protocol forbids (Kafka's InvalidRequestException)."""


class GroupIdNotFoundError(GroupError):
    """GROUP_ID_NOT_FOUND: no group of the requested type under this id."""


class UnknownMemberIdError(GroupError):
    """UNKNOWN_MEMBER_ID: the member is not (or no longer) in the group."""


class FencedMemberEpochError(GroupError):
    """FENCED_MEMBER_EPOCH: the heartbeat's epoch is not the member's; it must rejoin with epoch 0."""


class StaleMemberEpochError(GroupError):
    """STALE_MEMBER_EPOCH: an OffsetCommit/OffsetFetch with an epoch other than the member's current one."""


class IllegalGenerationError(GroupError):
    """ILLEGAL_GENERATION: the classic-protocol counterpart of :class:`StaleMemberEpochError`."""


class GroupMaxSizeReachedError(GroupError):
    """GROUP_MAX_SIZE_REACHED: ``group.consumer.max.size`` members are already in the group."""


class UnsupportedAssignorError(GroupError):
    """UNSUPPORTED_ASSIGNOR: the heartbeat names a server assignor the broker does not run."""


class UnreleasedInstanceIdError(GroupError):
    """UNRELEASED_INSTANCE_ID: a static member's instance id is still held by a live member."""


class FencedInstanceIdError(GroupError):
    """FENCED_INSTANCE_ID: the instance id now belongs to another member id."""


class InconsistentGroupProtocolError(GroupError):
    """INCONSISTENT_GROUP_PROTOCOL: a classic JoinGroup for a group of the consumer protocol."""


class NonEmptyGroupError(GroupError):
    """NON_EMPTY_GROUP: DeleteGroups of a group that still has members."""


class UnsupportedGroupVersionError(GroupError):
    """UNSUPPORTED_VERSION: e.g. an OffsetCommit below v9 from a member of the consumer protocol."""


class InvalidRegularExpressionError(GroupError):
    """INVALID_REGULAR_EXPRESSION: a subscribed topic regex that does not compile."""


class InvalidGroupIdError(GroupError):
    """INVALID_GROUP_ID: an empty group id where the request needs one."""


class InvalidSessionTimeoutError(GroupError):
    """INVALID_SESSION_TIMEOUT: a JoinGroup session timeout outside group.min/max.session.timeout.ms."""


class CoordinatorNotAvailableError(GroupError):
    """COORDINATOR_NOT_AVAILABLE: the group is being removed (Dead); the client looks for its
    coordinator again."""


class RebalanceInProgressError(GroupError):
    """REBALANCE_IN_PROGRESS: the member must rejoin (or wait for the rebalance) first."""


class OffsetMetadataTooLargeError(GroupError):
    """OFFSET_METADATA_TOO_LARGE: a committed offset's metadata exceeds offset.metadata.max.bytes."""
