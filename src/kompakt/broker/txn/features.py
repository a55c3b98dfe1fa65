"""The ``transaction.version`` feature level: what ApiVersions finalizes and UpdateFeatures changes.

On Kafka the finalized level is cluster metadata: set when the storage is formatted (2 on 4.1)
and changed with ``kafka-features upgrade|downgrade`` (UpdateFeatures to the controller). kompakt
has no metadata quorum, so the broker config ``transaction.version`` is the level a broker starts
with, and an UpdateFeatures change is kept in ``<data-dir>/kompakt-features.json`` (written
atomically before it is installed), which wins over the config at the next start, as Kafka's
metadata wins over the format-time default: ``{"version": 1, "features": {"transaction.version": 1}}``.

Validation follows Kafka 4.1's ``FeatureControlManager.updateFeature``, messages included.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kompakt.log.files import atomic_write_bytes

log = logging.getLogger(__name__)

FEATURES_FILE: Final = "kompakt-features.json"
TRANSACTION_VERSION: Final = "transaction.version"
METADATA_VERSION: Final = "metadata.version"
GROUP_VERSION: Final = "group.version"
#: Features served at one level: ``metadata.version`` 27 (4.1-IV1, the RPC behaviour kompakt
#: follows) and ``group.version`` 1 (the KIP-848 consumer protocol, which kompakt cannot switch
#: off). Kafka 4.1.2 also lists ``kraft.version`` and ``eligible.leader.replicas.version``
#: (a controller quorum and replicas, which a single kompakt node does not have) and
#: ``share.version`` (share groups, not served): kompakt does not claim them.
FIXED_LEVELS: Final[dict[str, int]] = {GROUP_VERSION: 1, METADATA_VERSION: 27}
#: What ApiVersions lists as supported: the fixed features at their level, and Kafka 4.1's
#: ``TransactionVersion`` levels TV_0..TV_2.
SUPPORTED: Final[dict[str, tuple[int, int]]] = {
    **{name: (level, level) for name, level in FIXED_LEVELS.items()},
    TRANSACTION_VERSION: (0, 2),
}
_DOCUMENT_VERSION: Final = 1

#: ``FeatureUpdate.UpgradeType`` codes.
UPGRADE: Final = 1
SAFE_DOWNGRADE: Final = 2
UNSAFE_DOWNGRADE: Final = 3


@dataclass(frozen=True, slots=True)
class FeatureUpdateError:
    """Why an update is refused: Kafka's INVALID_UPDATE_VERSION message for it."""

    message: str


def load_levels(data_dir: Path) -> dict[str, int]:
    """The persisted levels (none when the file is missing; an unreadable one is logged and ignored)."""
    path = data_dir / FEATURES_FILE
    if not path.exists():
        return {}
    try:
        document = json.loads(path.read_text())
        features = document["features"]
        if not isinstance(features, dict):
            raise ValueError("features must be an object")
        levels = {str(k): int(v) for k, v in features.items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.error("Ignoring unreadable %s: %s", path, exc)
        return {}
    for name, level in list(levels.items()):
        low, high = SUPPORTED.get(name, (0, -1))
        if not low <= level <= high:
            log.error("Ignoring %s=%d in %s: this broker supports %d-%d", name, level, path, low, high)
            del levels[name]
    return levels


def finalized_levels(transaction_version: int) -> dict[str, int]:
    """Every finalized feature and its level, by name; a level of 0 is not listed (Kafka lists
    only features finalized above 0)."""
    levels = {**FIXED_LEVELS, TRANSACTION_VERSION: transaction_version}
    return {name: levels[name] for name in sorted(levels) if levels[name] > 0}


def save_levels(data_dir: Path, levels: dict[str, int]) -> None:
    document = {"version": _DOCUMENT_VERSION, "features": dict(sorted(levels.items()))}
    atomic_write_bytes(data_dir / FEATURES_FILE, (json.dumps(document, indent=2) + "\n").encode())


def check_update(
    feature: str, current: int, level: int, upgrade_type: int, node_id: int
) -> FeatureUpdateError | None:
    """``FeatureControlManager.updateFeature``'s checks for one feature."""

    def invalid(why: str) -> FeatureUpdateError:
        return FeatureUpdateError(f"Invalid update version {level} for feature {feature}. {why}")

    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return invalid("The controller does not support the given upgrade type.")
    if level < 0:
        return invalid("A feature version cannot be less than 0.")
    supported = SUPPORTED.get(feature)
    if supported is None:
        return invalid(f"Local controller {node_id} does not support this feature.")
    low, high = supported
    if not low <= level <= high:
        return invalid(f"Local controller {node_id} only supports versions {low}-{high}")
    if level < current and upgrade_type == UPGRADE:
        return invalid(
            "Can't downgrade the version of this feature without setting the upgrade type to "
            "either safe or unsafe downgrade."
        )
    if level > current and upgrade_type != UPGRADE:
        return invalid("Can't downgrade to a newer version.")
    return None
