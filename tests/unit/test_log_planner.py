"""The log reader's plans, without Spark or nsqd: ranges cut into
partitions (``max_messages_per_partition``, ``minPartitions``) and a batch
capped by ``maxOffsetsPerTrigger`` across nodes."""

import pytest

pytest.importorskip("pyspark")

from nsqpy.spark.logsource import LogPlanner, NSQLogStreamReader  # noqa: E402
from nsqpy.spark.options import SourceOptions  # noqa: E402


def planner(**options) -> LogPlanner:
    parsed = SourceOptions.parse({"topic": "t", "nsqd_tcp_addresses": "a:4150,b:4150",
                                  **{key: str(value) for key, value in options.items()}})
    found = LogPlanner(parsed)
    found.http = {"a:4150": "a:4151", "b:4150": "b:4151"}
    return found


def covered(partitions) -> dict[str, list[int]]:
    ranges: dict[str, list[int]] = {}
    for partition in partitions:
        ranges.setdefault(partition.node, []).extend(range(partition.start, partition.end))
    return ranges


def test_every_offset_is_in_exactly_one_partition_of_at_most_the_size_asked():
    partitions = planner(max_messages_per_partition=100).partitions({"a:4150": 10, "b:4150": 0},
                                                                    {"a:4150": 1010, "b:4150": 250})
    assert covered(partitions) == {"a:4150": list(range(10, 1010)), "b:4150": list(range(250))}
    assert max(p.end - p.start for p in partitions) <= 100 and len(partitions) == 13
    assert {p.http_address for p in partitions if p.node == "b:4150"} == {"b:4151"}


def test_min_partitions_splits_further_and_nothing_is_planned_where_nothing_waits():
    partitions = planner(minPartitions=8).partitions({"a:4150": 0, "b:4150": 5}, {"a:4150": 600, "b:4150": 5})
    assert len(partitions) == 8 and covered(partitions) == {"a:4150": list(range(600))}
    few = planner(minPartitions=8).partitions({"a:4150": 0}, {"a:4150": 3})
    assert [(p.start, p.end) for p in few] == [(0, 1), (1, 2), (2, 3)]  # never an empty partition


def test_a_trigger_cap_is_shared_by_the_nodes_in_proportion_to_what_waits():
    reader = NSQLogStreamReader(planner(maxOffsetsPerTrigger=100).options)
    capped = reader._capped({"a:4150": 0, "b:4150": 0}, {"a:4150": 900, "b:4150": 100})
    assert capped == {"a:4150": 90, "b:4150": 10}
    assert reader._capped({"a:4150": 0, "b:4150": 0}, {"a:4150": 50, "b:4150": 20}) == {"a:4150": 50, "b:4150": 20}
