"""``kompakt log explain <a whole Kafka 4 log directory> --bootstrap HOST:PORT`` (issue 31).

Every KRaft node has ``__cluster_metadata-0`` in its log directory, which no cluster describes as
a topic: explain exited 1 on DescribeConfigs' UNKNOWN_TOPIC_OR_PART for every Kafka 4 directory,
``--html`` too. It is not asked about now (the offline tools leave the metadata log out), a topic
the cluster does not know (deleted since) is explained without the cluster's configs and said in a
note, and the broker configs are those of the directory's own broker (``meta.properties`` node.id).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kompakt.log.metadata_files import read_meta_properties
from kompakt.testing.broker import InProcessBroker
from tests.support.log_dirs import T0, kafka_batch, kafka_dir


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[InProcessBroker]:
    with InProcessBroker(tmp_path / "broker-data", overrides={"log.cleaner.enable": "false"}) as broker:
        broker.create_topic("orders", cleanup_policy="compact", min_cleanable_dirty_ratio=0.01)
        yield broker


def whole_kafka_dir(root: Path, node_id: int = 1, cluster_id: str = "abc") -> Path:
    """A KRaft node's log directory: a topic the cluster knows, one it does not (deleted since),
    and the metadata log."""
    kafka_dir(root, "orders")
    for name in ("gone-0", "__cluster_metadata-0"):
        part = root / name
        part.mkdir()
        (part / "00000000000000000000.log").write_bytes(kafka_batch(0, [(b"k", b"v")]))
    (root / "meta.properties").write_text(f"version=1\nnode.id={node_id}\ncluster.id={cluster_id}\n")
    return root


def explain(cli: Any, path: Path, *args: str) -> Any:
    return cli("log", "explain", str(path), "--now", str(T0), *args)


def test_a_whole_kafka_directory_is_explained_with_the_clusters_configs(
    cluster: InProcessBroker, cli: Any, tmp_path: Path
) -> None:
    root = whole_kafka_dir(tmp_path / "node1")
    bootstrap = cluster.bootstrap_servers
    got = explain(cli, root, "--bootstrap", bootstrap, "-o", "json")
    assert got.code == 0, got.err
    reports = {f"{r['topic']}-{r['partition']}": r for r in got.json()}
    assert sorted(reports) == ["gone-0", "orders-0"]
    policy = next(c for c in reports["orders-0"]["configs"] if c["name"] == "cleanup.policy")
    assert (policy["value"], policy["source"]) == ("compact", f"topic override (cluster {bootstrap})")
    assert reports["gone-0"]["verdict"] == "not compacting: cleanup.policy is delete"
    err = " ".join(got.err.split())
    assert f"the cluster at {bootstrap} does not know topic(s) gone (deleted since" in err
    assert f"the directory's node.id 1 is not a broker of the cluster at {bootstrap}" in err
    assert "the directory belongs to cluster abc" in err

    page = tmp_path / "map.html"
    got = explain(cli, root, "--bootstrap", bootstrap, "--html", str(page))
    assert got.code == 0, got.err
    assert "wrote the log map of 2 partitions" in got.out
    html = page.read_text()
    assert "orders-0" in html and "gone-0" in html and "__cluster_metadata" not in html

    got = explain(cli, root, "--bootstrap", bootstrap, "--summary")
    assert got.code == 0, got.err
    assert "orders-0" in got.out and "__cluster_metadata" not in got.out


def test_the_directorys_own_broker_is_asked(cluster: InProcessBroker, cli: Any, tmp_path: Path) -> None:
    meta = read_meta_properties(cluster.data_dir)
    assert meta is not None
    root = whole_kafka_dir(tmp_path / "node0", node_id=meta.node_id, cluster_id=meta.cluster_id)
    got = explain(cli, root, "--bootstrap", cluster.bootstrap_servers, "-o", "json")
    assert got.code == 0, got.err
    assert "is not a broker of the cluster" not in got.err and "belongs to cluster" not in got.err
    got = explain(cli, root / "__cluster_metadata-0", "--bootstrap", cluster.bootstrap_servers)
    assert got.code == 2 and "is KRaft's metadata log, not a topic" in got.err
