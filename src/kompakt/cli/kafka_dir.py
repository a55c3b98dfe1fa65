"""The offline commands on a Kafka 4 log directory: its metadata log, and what they say about it.

Every KRaft node keeps the cluster's topics and configs in ``__cluster_metadata-0`` in its log
directory (:mod:`kompakt.log.cluster_metadata` reads it). The offline commands (``log explain``,
the static map, ``log compact``, ``log verify``, ``table --log-dir``, ``sizing --log-dir``) take
each topic's overrides and the broker-level overrides from it, layered as Kafka layers them:
``server.properties`` < the cluster default (``--entity-default``) < this broker's own < the
topic's own, with ``--broker-config`` and ``--config`` still winning over everything. This module
holds what those commands share: reading the log once with its notes on stderr, the partition
directories Kafka would not serve, and the empty internal partitions a table leaves out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from kompakt.cli import output
from kompakt.inspect.log_files import PartitionDir
from kompakt.log.cluster_metadata import ClusterMetadata, read_cluster_metadata

_SHOWN = 4


def note(text: str) -> None:
    output.err_console.print(f"note: {text}", markup=False, highlight=False, soft_wrap=True)


def _listed(items: Sequence[str]) -> str:
    more = f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else ""
    return ", ".join(items[:_SHOWN]) + more


def load_metadata(data_dir: Path | None) -> ClusterMetadata | None:
    """The metadata log of ``data_dir`` (None for a kompakt directory or one without it), with a
    note for what reading it skipped and for the topic overrides kompakt does not define."""
    if data_dir is None:
        return None
    metadata = read_cluster_metadata(data_dir)
    if metadata is None:
        return None
    for problem in metadata.problems:
        note(f"metadata log {metadata.directory}: {problem}")
    ignored = metadata.ignored_topic_configs()
    if ignored:
        shown = [f"{topic}: {', '.join(names)}" for topic, names in sorted(ignored.items())]
        note(f"metadata log: topic configs kompakt does not define are ignored ({_listed(shown)})")
    return metadata


def stray_partitions(
    metadata: ClusterMetadata | None, partitions: Iterable[PartitionDir]
) -> dict[tuple[str, int], str]:
    """The partition directories the metadata log does not assign to this node, each with why, and
    one note naming them: Kafka renames them ``-stray`` at its next start and never serves them."""
    if metadata is None:
        return {}
    strays = {}
    for part in partitions:
        reason = metadata.stray_reason_of(part.path, part.topic, part.partition)
        if reason is not None:
            strays[(part.topic, part.partition)] = reason
    if strays:
        shown = [f"{t}-{p} ({reason})" for (t, p), reason in sorted(strays.items())]
        note(
            f"{len(strays)} partition director{'y is' if len(strays) == 1 else 'ies are'} not in "
            f"the metadata log, so Kafka renames them -stray at its next start and never serves "
            f"them: {_listed(shown)}"
        )
    return strays


def note_hidden_internal(names: Sequence[str]) -> None:
    """Say how many empty internal partitions a table left out, and where to see them."""
    if not names:
        return
    topics = sorted({n.rpartition("-")[0] for n in names})
    note(
        f"{len(names)} empty partition{'s' if len(names) != 1 else ''} of {', '.join(topics)} not "
        "listed (-o json lists every partition)"
    )


__all__ = ["load_metadata", "note", "note_hidden_internal", "stray_partitions"]
