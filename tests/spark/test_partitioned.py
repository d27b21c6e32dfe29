"""The executors reader (``reader=executors``) against real nsqd: planning,
parallel partitions, and replays from the partition log."""

import collections
import os

import pytest

from nsqpy.spark.options import SourceOptions
from nsqpy.spark.partitioned import NSQPartitionedReader
from nsqpy.spark.plan import initial_offset, plan_batch, split
from nsqpy.spark.archive import start_archive

from .conftest import archived_bodies, channel_stats, publish, source_options

pytestmark = pytest.mark.spark


def _bodies(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{i:06d}".encode() for i in range(count)]


def _executors_options(nsqds, topic: str, wal, **extra) -> dict:
    return {"topic": topic, "channel": "archive", "reader": "executors", "walPath": str(wal),
            "nsqd_tcp_addresses": ",".join(n.tcp_address for n in nsqds),
            "nsqd_http_addresses": ",".join(n.http_address for n in nsqds),
            **{k: str(v) for k, v in extra.items()}}


def test_a_batch_is_cut_into_near_equal_partitions_in_proportion_to_each_node():
    assert split(10, 4) == [4, 3, 3] and split(0, 4) == [] and split(8, 8) == [8]
    assert plan_batch({"a:1": 6, "b:1": 0, "c:1": 3}, per_batch=100, per_partition=4) == [
        ("a:1", 3), ("a:1", 3), ("c:1", 3)]
    capped = plan_batch({"a:1": 3000, "b:1": 1000}, per_batch=1001, per_partition=500)
    assert sum(count for _, count in capped) == 1001
    assert collections.Counter(address for address, _ in capped) == {"a:1": 2, "b:1": 1}


def test_a_retried_task_replays_its_partition_and_reads_nsqd_no_more(spark_nsqd, topic, tmp_path):
    """Spark's calls made by hand: a partition is read (logged, FINished,
    confirmed), then read again as a retried task would be: the same rows,
    and nsqd's next messages stay where they are. The commit deletes the log."""
    publish(spark_nsqd, topic, _bodies(topic, 500))
    reader = NSQPartitionedReader(SourceOptions.parse(_executors_options(
        [spark_nsqd], topic, tmp_path / "wal", max_messages_per_batch=300, max_messages_per_partition=200)))
    start = initial_offset()
    end = reader.latestOffset(start, None)
    partitions = reader.partitions(start, end)
    assert [p.max_messages for p in partitions] == [150, 150]

    def ids(partition):
        return sorted(i for rows in reader.read(partition) for i in rows.column("id").to_pylist())

    first = [ids(p) for p in partitions]
    assert [len(found) for found in first] == [150, 150] and not set(first[0]) & set(first[1])
    assert [ids(p) for p in partitions] == first  # the retries
    stats = channel_stats(spark_nsqd, topic, "archive")
    assert (stats["depth"], stats["in_flight_count"], stats["requeue_count"]) == (200, 0, 0)
    assert len(os.listdir(tmp_path / "wal")) == 4  # two partitions, each logged and confirmed
    reader.commit(end)
    assert os.listdir(tmp_path / "wal") == []


def test_parallel_partitions_over_two_nsqd_archive_every_message_once(spark, start_nsqd, topic, tmp_path):
    nodes = [start_nsqd() for _ in range(2)]
    bodies = []
    for i, node in enumerate(nodes):
        bodies += _bodies(f"{topic}-node{i}", 3000)
        publish(node, topic, bodies[-3000:])
    options = _executors_options(nodes, topic, tmp_path / "wal", max_messages_per_partition=1000)
    query = start_archive(spark, options, str(tmp_path / "out"), str(tmp_path / "ck"), available_now=True)
    query.awaitTermination(120)
    assert query.exception() is None
    archived = archived_bodies(spark, tmp_path / "out")
    assert sorted(archived) == sorted(bodies)
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    plan = [entry for p in batches for entry in _end_offset(p)["plan"]]
    # three partitions per node in the one batch (2,500 rows at most per connection at nsqd's defaults)
    assert len(batches) == 1 and sorted(plan) == sorted([[n.tcp_address, 1000] for n in nodes for _ in range(3)])
    for node in nodes:
        stats = channel_stats(node, topic, "archive")
        assert (stats["depth"], stats["in_flight_count"]) == (0, 0)
    assert os.listdir(tmp_path / "wal") == []


def _end_offset(progress) -> dict:
    import json
    end = progress["sources"][0]["endOffset"]
    return json.loads(end) if isinstance(end, str) else end
