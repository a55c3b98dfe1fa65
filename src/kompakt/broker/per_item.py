"""Admin requests answered item by item: CreateTopics, CreatePartitions, DeleteTopics, the AlterConfigs.

Kafka answers these APIs per topic or per resource: one item's failure is that item's error code
and message, never the whole request's, and an item named twice in one request is refused with
INVALID_REQUEST without being acted on. :func:`answer_each` is that loop once, so the handlers
only say what acting on one item means and how its answer is built.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

from kompakt.broker.topic_admin import AdminError, as_admin_error
from kompakt.protocol.codec import ErrorCode

T = TypeVar("T")
R = TypeVar("R")


def answer_each(
    items: Iterable[T],
    key: Callable[[T], Hashable],
    act: Callable[[T], R],
    fail: Callable[[T, AdminError], R],
    *,
    duplicate: str,
    duplicate_answered_once: bool = True,
) -> list[R]:
    """The answer for each item, in request order: ``act(item)``, or ``fail(item, error)``.

    Items whose ``key`` occurs more than once fail with INVALID_REQUEST and the message
    ``duplicate``, answered once per key when ``duplicate_answered_once`` (CreateTopics,
    CreatePartitions, DeleteTopics) and once per occurrence otherwise (the AlterConfigs, as
    Kafka's ``ConfigAdminManager`` answers them). Any exception from ``act`` answers that item only,
    with the code the one error map gives it (:func:`~kompakt.broker.topic_admin.as_admin_error`).
    """
    listed = list(items)
    counts = Counter(key(item) for item in listed)
    reported: set[Hashable] = set()
    answers: list[R] = []
    for item in listed:
        name = key(item)
        if counts[name] > 1:
            if not duplicate_answered_once or name not in reported:
                reported.add(name)
                answers.append(fail(item, AdminError(ErrorCode.invalid_request, duplicate)))
            continue
        try:
            answer = act(item)
        except Exception as exc:  # noqa: BLE001 - every failure answers this item only
            answers.append(fail(item, as_admin_error(exc)))
            continue
        answers.append(answer)
    return answers
