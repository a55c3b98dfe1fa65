"""``reset-offsets --shift-by N`` and ``--by-duration PnDTnHnMnS``: the two relative resets of
Kafka's ``ConsumerGroupCommand``, for ``kompakt group reset-offsets`` and ``kafka-consumer-groups``.

* ``--shift-by N`` moves each partition's committed offset by N (negative goes back), clamped to
  the partition's log start and end offsets; a partition with no committed offset is an error, as
  in Kafka ("Cannot shift offset for partition T-P since there is no current committed offset").
* ``--by-duration D`` moves to the first offset at or after now minus D, an ISO-8601 duration as
  Java's ``Duration.parse`` reads it (days, hours, minutes, seconds: ``P1DT2H``, ``PT30M``,
  ``-PT10S``); a partition with no record that recent falls back to its end offset, and Kafka's
  tool prints ``Warn: Partition P from topic T is empty. Falling back to latest known offset.``
  for it (in the order of its HashMap), which is returned here for the caller to print.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO

from kompakt.cli.kafka_java import hash_order, topic_partition_hash
from kompakt.cli.output import CliError, CliUsageError

TP = tuple[str, int]
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)


def parse_duration_ms(text: str) -> int:
    """Java's ``Duration.parse``, in milliseconds (``P1DT2H`` is 93 600 000)."""
    match = _DURATION.fullmatch(text)
    if match is None or match.group(3) == "T" or not any(match.group(i) for i in (2, 4, 5, 6)):
        raise CliUsageError(f"--by-duration: Text cannot be parsed to a Duration: {text}")
    sign, days, _, hours, minutes, seconds, fraction = match.groups()
    ms = (
        int(days or 0) * 86_400_000
        + int(hours or 0) * 3_600_000
        + int(minutes or 0) * 60_000
        + int(seconds or 0) * 1000
    )
    if fraction:
        frac_ms = int((fraction + "000")[:3])
        ms += -frac_ms if (seconds or "").startswith("-") else frac_ms
    return -ms if sign == "-" else ms


def shifted(
    partitions: list[TP],
    committed: Mapping[TP, int],
    shift_by: int,
    earliest: Mapping[TP, int],
    latest: Mapping[TP, int],
) -> dict[TP, int]:
    """Each partition's committed offset plus ``shift_by``, clamped to its range."""
    target: dict[TP, int] = {}
    for tp in partitions:
        if tp not in committed:
            raise CliError(
                f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no current "
                "committed offset"
            )
        wanted = committed[tp] + shift_by
        target[tp] = min(max(wanted, earliest[tp]), latest[tp])
        if wanted != target[tp]:
            # Kafka's tool logs this (a WARN line on stderr) and resets to the bound.
            side = "higher than latest" if wanted > latest[tp] else "lower than earliest"
            sys.stderr.write(
                f"WARN New offset ({wanted}) is {side} offset for topic partition {tp[0]}-{tp[1]}. "
                f"Value will be set to {target[tp]}\n"
            )
    return target


def by_time(
    partitions: list[TP], found: Mapping[TP, int], latest: Mapping[TP, int]
) -> tuple[dict[TP, int], list[str]]:
    """The offsets for a timestamp, the end offset where there is none, and Kafka's warnings."""
    missing = [tp for tp in partitions if found[tp] < 0]
    warnings = [
        f"\nWarn: Partition {p} from topic {t} is empty. Falling back to latest known offset."
        for t, p in hash_order(missing, lambda k: topic_partition_hash(*k))
    ]
    return {tp: found[tp] if found[tp] >= 0 else latest[tp] for tp in partitions}, warnings


@dataclass(frozen=True)
class Relative:
    """One of the two relative resets, checked before the cluster is asked anything."""

    shift_by: int | None
    duration_ms: int | None

    @classmethod
    def of(cls, shift_by: int | None, by_duration: str | None) -> Relative | None:
        if shift_by is None and by_duration is None:
            return None
        return cls(shift_by, None if by_duration is None else parse_duration_ms(by_duration))

    def target(
        self,
        partitions: list[TP],
        committed: Mapping[TP, int],
        earliest: Mapping[TP, int],
        latest: Mapping[TP, int],
        offsets_for_time: Callable[[int], Mapping[TP, int]],
        warn: IO[str] | None,
    ) -> dict[TP, int]:
        """The new offsets; ``--by-duration``'s fall-back warnings go to ``warn`` (Kafka prints
        them on stdout before the plan), none when it is None (JSON output)."""
        if self.shift_by is not None:
            return shifted(partitions, committed, self.shift_by, earliest, latest)
        assert self.duration_ms is not None
        target, warnings = by_time(
            partitions, offsets_for_time(int(time.time() * 1000) - self.duration_ms), latest
        )
        for warning in warnings if warn is not None else ():
            assert warn is not None
            warn.write(warning + "\n")
        return target
