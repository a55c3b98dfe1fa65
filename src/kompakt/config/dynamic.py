"""The dynamic configs a broker persists: its two dynamic layers and every group's own configs.

Kafka keeps AlterConfigs changes in its metadata log; kompakt has no controller quorum, so it
writes them to ``<data-dir>/kompakt-broker-dynamic.json`` (atomically: a crash leaves the old or
the new document, never half of one) before it installs them, and reads them back at start-up:

    {"version": 1, "cluster_default": {name: value}, "broker": {name: value},
     "groups": {group id: {name: value}}}

``groups`` came later; a document without it has no group configs. Like Kafka, an entry that is
no longer valid (an upgrade, a changed ``server.properties``) is logged and skipped instead of
stopping the broker; the file itself is left as it is until the next change rewrites it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kompakt.config.broker import BrokerConfig
from kompakt.config.groups import GroupConfigs
from kompakt.errors import ConfigError

__all__ = [
    "DYNAMIC_BROKER_CONFIG_FILE",
    "AtomicWrite",
    "load_dynamic_broker_config",
    "load_dynamic_configs",
    "save_dynamic_configs",
]

log = logging.getLogger(__name__)

DYNAMIC_BROKER_CONFIG_FILE = "kompakt-broker-dynamic.json"
_VERSION = 1


#: ``write(path, data)``: replace a file so that a crash leaves the old or the new content.
AtomicWrite = Callable[[Path, bytes], None]


def save_dynamic_configs(
    data_dir: str | Path, config: BrokerConfig, groups: GroupConfigs, *, write: AtomicWrite
) -> None:
    """Write both dynamic layers and every group's configs: the whole document, so a broker change
    keeps the groups' configs and the other way round. ``write`` is the log's atomic write
    (``kompakt.log.files.atomic_write_bytes``): files are the storage layer's, above this one."""
    document = {
        "version": _VERSION,
        "cluster_default": dict(sorted(config.dynamic_default.items())),
        "broker": dict(sorted(config.dynamic.items())),
        "groups": {group: dict(sorted(values.items())) for group, values in sorted(groups.overrides.items())},
    }
    data = (json.dumps(document, indent=2) + "\n").encode()
    write(Path(data_dir) / DYNAMIC_BROKER_CONFIG_FILE, data)


def _valid_layer(
    layer: Mapping[str, object], static: BrokerConfig, *, cluster_default: bool
) -> dict[str, str]:
    kept: dict[str, str] = {}
    for key, value in layer.items():
        if not isinstance(value, str):
            log.warning("Ignoring dynamic broker config %s: value %r is not a string", key, value)
            continue
        try:
            if cluster_default:
                type(static)(static=static.static, dynamic_default={key: value})
            else:
                type(static)(static=static.static, dynamic={key: value})
        except ConfigError as exc:
            log.warning("Ignoring dynamic broker config %s=%s: %s", key, value, exc)
            continue
        kept[key] = value
    return kept


def _valid_groups(raw: Mapping[str, object], broker: BrokerConfig) -> GroupConfigs:
    groups = GroupConfigs()
    for group_id, values in raw.items():
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            log.warning("Ignoring the configs of group %s: %r is not an object of strings", group_id, values)
            continue
        try:
            groups = groups.with_group(group_id, values, broker)
        except ConfigError as exc:
            log.warning("Ignoring the configs of group %s (%s): %s", group_id, values, exc)
    return groups


def _read(path: Path) -> dict[str, Any] | None:
    try:
        document = json.loads(path.read_text())
        if not isinstance(document, dict) or document.get("version") != _VERSION:
            raise ValueError(f"unsupported document {str(document)[:80]!r}")
        for key in ("cluster_default", "broker", "groups"):
            if not isinstance(document.get(key, {}), dict):
                raise ValueError(f"{key} must be an object")
    except (OSError, ValueError) as exc:
        log.error("Ignoring unreadable %s: %s", path, exc)
        return None
    return document


def load_dynamic_configs(data_dir: str | Path, static: BrokerConfig) -> tuple[BrokerConfig, GroupConfigs]:
    """``static`` with the persisted dynamic layers applied, and the groups' configs (called once
    at start-up, before the data directory is opened). A missing file means none of either; the
    threads update rule does not apply here: there is no running value to compare against."""
    path = Path(data_dir) / DYNAMIC_BROKER_CONFIG_FILE
    if not path.exists():
        return static, GroupConfigs()
    document = _read(path)
    if document is None:
        return static, GroupConfigs()
    dynamic_default = _valid_layer(document.get("cluster_default", {}), static, cluster_default=True)
    dynamic = _valid_layer(document.get("broker", {}), static, cluster_default=False)
    try:
        broker = type(static)(static=static.static, dynamic_default=dynamic_default, dynamic=dynamic)
    except ConfigError as exc:
        log.error("Ignoring the dynamic broker configs in %s, invalid together: %s", path, exc)
        broker = static
    return broker, _valid_groups(document.get("groups", {}), broker)


def load_dynamic_broker_config(data_dir: str | Path, static: BrokerConfig) -> BrokerConfig:
    """Only the broker layers of :func:`load_dynamic_configs` (the offline tools' view)."""
    return load_dynamic_configs(data_dir, static)[0]
