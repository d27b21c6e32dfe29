"""The executors reader (``reader=executors``) against real nsqd: planning,
parallel partitions, and replays from the partition log."""

import collections
import dataclasses
import json
import sys

import pytest

from nsqpy.spark.archive import drain_file, start_archive, stop_gracefully
from nsqpy.spark.fetcher import Fetcher
from nsqpy.spark.options import SourceOptions
from nsqpy.spark.partitioned import NSQPartition, NSQPartitionedReader
from nsqpy.spark.plan import initial_offset, plan_batch, split
from nsqpy.spark import chunks
from nsqpy.spark.chunks import to_record_batch
from nsqpy.spark.wal import PartitionLog
from tests.support.wire import WireConn, http_json, wait_until

from .conftest import (archive_command, archived_bodies, bodies_other_readers_see, channel_stats, publish,
                       rows_at_least, source_options, starve_until_timed_out)

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
    assert len(_logged(tmp_path / "wal")) == 4  # two partitions, each logged and confirmed
    reader.commit(end)
    assert _logged(tmp_path / "wal") == []


def test_a_partition_whose_messages_timed_out_before_its_fins_stays_unconfirmed_and_the_copies_are_dropped(
        start_nsqd, topic, tmp_path, monkeypatch):
    """Spark's calls made by hand, on a machine too busy for the fetcher's
    TOUCHes: its event loop is starved past nsqd's --msg-timeout between the
    log write and the FINs, so nsqd has put the partition's messages back in
    the queue and refuses the FINs. The partition's log must stay
    unconfirmed, and the next batch drop the redeliveries, not archive them
    a second time."""
    nsqd = start_nsqd("--msg-timeout=1s")
    publish(nsqd, topic, _bodies(topic, 100))
    wal = tmp_path / "wal"
    reader = NSQPartitionedReader(SourceOptions.parse(_executors_options([nsqd], topic, wal,
                                                                         max_messages_per_partition=100)))
    finish = Fetcher.finish

    def finish_after_a_starved_loop(fetcher, held):
        starve_until_timed_out(fetcher, nsqd, topic, 100)
        return finish(fetcher, held)

    def ids(partition) -> list[str]:
        return sorted(i for rows in reader.read(partition) for i in rows.column("id").to_pylist())

    start = initial_offset()
    end = reader.latestOffset(start, None)
    [partition] = reader.partitions(start, end)
    with monkeypatch.context() as patched:
        patched.setattr(Fetcher, "finish", finish_after_a_starved_loop)
        archived = ids(partition)
    assert len(archived) == 100
    assert PartitionLog(str(wal)).unconfirmed_ids() == set(archived)
    reader.commit(end)

    again = reader.latestOffset(end, None)
    assert [ids(p) for p in reader.partitions(end, again)] == [[]]
    stats = channel_stats(nsqd, topic, "archive")
    assert (stats["depth"], stats["in_flight_count"]) == (0, 0)


def test_under_available_now_what_a_partition_did_not_receive_is_read_by_a_later_batch(spark_nsqd, topic, tmp_path):
    """Spark's calls made by hand: the run plans two partitions of 150 for
    the 300 waiting; another consumer holds 150 in flight while they read,
    so one partition receives nothing within idle_timeout. Once those come
    back, the next batch plans them, and then the run ends."""
    publish(spark_nsqd, topic, _bodies(topic, 300))
    reader = NSQPartitionedReader(SourceOptions.parse(_executors_options(
        [spark_nsqd], topic, tmp_path / "wal", max_messages_per_partition=150, idle_timeout=1)))
    reader.prepareForTriggerAvailableNow()
    start = initial_offset()
    end = reader.latestOffset(start, None)

    def rows_read(start, end) -> list[int]:
        return [sum(rows.num_rows for rows in reader.read(p)) for p in reader.partitions(start, end)]

    with WireConn(spark_nsqd.tcp_hostport) as other:
        other.identify()
        other.subscribe(topic, "archive", rdy=150)
        other.messages(150, timeout=30)
        assert sorted(rows_read(start, end)) == [0, 150]
    wait_until(lambda: channel_stats(spark_nsqd, topic, "archive")["depth"] == 150, timeout=30)  # given back
    reader.commit(end)
    again = reader.latestOffset(end, None)
    assert again["plan"] == [[spark_nsqd.tcp_address, 150]] and rows_read(end, again) == [150]
    reader.commit(again)
    assert reader.latestOffset(again, None) == again  # all that waited at the start is read: the run ends


def test_redeliveries_of_a_partition_nsqd_never_confirmed_are_dropped(spark_nsqd, topic, tmp_path):
    """The window: a partition logged its rows, and its FINs never reached
    nsqd (here: never sent, the connection closed). nsqd delivers the
    messages again; the partition that receives them FINs them and archives
    nothing: every one was received (nothing waits or is in flight), none
    returned."""
    publish(spark_nsqd, topic, _bodies(topic, 100))
    options = SourceOptions.parse(_executors_options([spark_nsqd], topic, tmp_path / "wal", idle_timeout=10))
    reader = NSQPartitionedReader(options)
    fetcher = Fetcher(dataclasses.replace(options, config=dataclasses.replace(options.config, max_in_flight=100)))
    try:
        held = fetcher.take(100, 5, 1)
        PartitionLog(options.wal_path).write(1, 0, to_record_batch(held, topic, reader.schema, False))
    finally:
        fetcher.close()
    assert chunks.count(held) == 100
    reader.commit({"batch": 1, "plan": [[spark_nsqd.tcp_address, 100]]})
    assert sorted(path.name for path in (tmp_path / "wal" / "watch").iterdir()) == [
        "batch-00000000000000000001-part-00000.arrow"]

    assert list(reader.read(NSQPartition(2, 0, spark_nsqd.tcp_address, 100))) == []
    stats = channel_stats(spark_nsqd, topic, "archive")
    assert (stats["depth"], stats["in_flight_count"]) == (0, 0)


def test_a_partition_whose_nsqd_is_gone_reads_nothing(start_nsqd, topic, tmp_path):
    """nsqd stopped between the plan and the task: the batch goes on without it."""
    nsqd = start_nsqd()
    reader = NSQPartitionedReader(SourceOptions.parse(_executors_options([nsqd], topic, tmp_path / "wal")))
    nsqd.stop()
    assert list(reader.read(NSQPartition(1, 0, nsqd.tcp_address, 100))) == []
    assert _logged(tmp_path / "wal") == []


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
    _assert_drained(nodes, topic)
    assert _logged(tmp_path / "wal") == []


def _end_offset(progress) -> dict:
    end = progress["sources"][0]["endOffset"]
    return json.loads(end) if isinstance(end, str) else end


def _logged(wal) -> list[str]:
    return sorted(path.name for path in wal.glob("batch-*")) if wal.exists() else []


def _assert_drained(nodes, topic: str, channel: str = "archive") -> None:
    for node in nodes:
        stats = channel_stats(node, topic, channel)
        assert (stats["depth"], stats["in_flight_count"]) == (0, 0)


def test_a_batch_that_failed_after_its_partitions_were_read_is_replayed_from_the_log(
        spark, spark_nsqd, topic, tmp_path):
    """The sink of batch 1 reads the batch (its partitions log and FINish
    their messages), then fails: the driver dies there, as far as the source
    can tell. The restart runs batch 1 again from the log (the very same
    ids), and every message lands exactly once. Reading a batch twice (here,
    collect then write) replays the log too."""
    bodies = _bodies(topic, 900)
    publish(spark_nsqd, topic, bodies)
    wal, out = tmp_path / "wal", tmp_path / "out"
    options = _executors_options([spark_nsqd], topic, wal, max_messages_per_batch=300,
                                 max_messages_per_partition=150)
    seen: dict = {}

    def run(fail: bool):
        def sink(batch, batch_id):
            ids = sorted(r.id for r in batch.select("id").collect())
            if fail and batch_id == 1:
                seen["failed"] = ids
                raise RuntimeError("sink down")
            seen.setdefault(batch_id, ids)
            batch.select("id", "body").write.mode("append").parquet(str(out / f"batch={batch_id}"))

        query = (spark.readStream.format("nsq").options(**options).load().writeStream.foreachBatch(sink)
                 .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
        try:
            query.awaitTermination(120)
        except Exception:  # asserted through query.exception()
            pass
        return query

    assert "sink down" in str(run(fail=True).exception())
    assert len(seen["failed"]) == 300
    assert len(_logged(wal)) == 4  # batch 1's two partitions, logged and confirmed, never committed
    assert channel_stats(spark_nsqd, topic, "archive")["depth"] == 300

    assert run(fail=False).exception() is None
    assert seen[1] == seen["failed"]
    archived = archived_bodies(spark, out)
    assert sorted(archived) == bodies
    _assert_drained([spark_nsqd], topic)
    assert _logged(wal) == []


def test_graceful_stop_then_restart_archives_every_message_once(spark, spark_nsqd, topic, tmp_path):
    bodies = _bodies(topic, 4000)
    publish(spark_nsqd, topic, bodies)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "ck")
    options = source_options(spark_nsqd, topic, reader="executors", max_messages_per_batch=400)
    query = start_archive(spark, options, out, checkpoint, trigger="200 milliseconds")
    wait_until(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 400, timeout=60)
    stopped = stop_gracefully(query, drain_file(checkpoint))
    assert stopped and stopped.released == 0
    archived = archived_bodies(spark, out)
    stats = channel_stats(spark_nsqd, topic, "archive")
    assert stats["in_flight_count"] == 0 and stats["depth"] == 4000 - len(archived)

    query = start_archive(spark, options, out, checkpoint, available_now=True)
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(archived_bodies(spark, out)) == bodies


def test_nsqd_restarting_mid_stream_loses_and_repeats_nothing(spark, start_nsqd, topic, tmp_path):
    """nsqd stops (cleanly: it keeps what was in flight) and comes back on the
    same addresses while batches run: a partition cut off before its FINs
    were confirmed has its redeliveries dropped, one cut off before its log
    write archives nothing of what it held, and batches planned meanwhile
    leave the node out until its /stats answers again."""
    bodies = _bodies(topic, 3000)
    data = tmp_path / "nsqd"
    nsqd = start_nsqd(data_path=data)
    tcp, http = nsqd.tcp_address, nsqd.http_address
    publish(nsqd, topic, bodies)
    checkpoint = str(tmp_path / "ck")
    options = _executors_options([nsqd], topic, tmp_path / "wal", max_messages_per_batch=300,
                                 max_messages_per_partition=150)
    query = start_archive(spark, options, str(tmp_path / "out"), checkpoint, trigger="100 milliseconds")
    wait_until(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 600, timeout=60)
    nsqd.stop()
    nsqd = start_nsqd(f"--tcp-address={tcp}", f"--http-address={http}", data_path=data)

    def drained():
        assert query.isActive, query.exception()
        stats = channel_stats(nsqd, topic, "archive")
        return stats and (stats["depth"], stats["in_flight_count"]) == (0, 0)

    wait_until(drained, timeout=90, interval=0.2)
    assert stop_gracefully(query, drain_file(checkpoint))
    assert sorted(archived_bodies(spark, tmp_path / "out")) == bodies


def test_driver_killed_between_the_log_and_the_commit_archives_every_message_once(
        spark, spark_nsqd, topic, tmp_path, archiver, capsys):
    """SIGKILL to the whole driver as soon as a partition is logged (its
    messages FINished, its batch not committed); the restart from the
    checkpoint replays what was logged. Every message exactly once, for Spark
    and for the readers that list the directory."""
    bodies = _bodies(topic, 8000)
    publish(spark_nsqd, topic, bodies)
    out = tmp_path / "out"
    wal = out / "_checkpoint" / "nsq-wal"
    running = archiver(archive_command(spark_nsqd, topic, out, "--trigger=0 seconds", "--status-every=0.1",
                                       "--max-messages-per-batch=1000", "--reader=executors",
                                       "--option=max_messages_per_partition=500"))
    running.wait_for(rows_at_least(1000), timeout=90)
    wait_until(lambda: any(wal.glob("batch-*.arrow")), timeout=30, interval=0.005)
    running.kill()
    left = _logged(wal)

    options = source_options(spark_nsqd, topic, "nsq_to_parquet", reader="executors")
    query = start_archive(spark, options, str(out), str(out / "_checkpoint"), available_now=True)
    query.awaitTermination(120)
    assert query.exception() is None
    archived = archived_bodies(spark, out)
    assert sorted(archived) == bodies
    assert bodies_other_readers_see(out) == sorted(archived)
    _assert_drained([spark_nsqd], topic, "nsq_to_parquet")
    assert _logged(wal) == []
    with capsys.disabled():
        print(f"\n  driver killed with {len([n for n in left if n.endswith('.arrow')])} partitions logged "
              f"and not committed: {len(bodies)} messages, each archived once")


def test_local_1_and_local_2_archive_the_same_backlog_from_two_nsqd(spark, start_nsqd, topic, tmp_path, archiver):
    """The same messages, one channel each: nsq_to_parquet on local[1] (its own
    JVM) and this session on local[2] archive every one exactly once."""
    nodes = [start_nsqd() for _ in range(2)]
    for node in nodes:
        assert http_json("POST", f"{node.http_url}/topic/create?topic={topic}")[0] == 200
        for channel in ("one", "two"):
            assert http_json("POST", f"{node.http_url}/channel/create?topic={topic}&channel={channel}")[0] == 200
    bodies = []
    for i, node in enumerate(nodes):
        bodies += _bodies(f"{topic}-node{i}", 2000)
        publish(node, topic, bodies[-2000:])
    addresses = [f"--nsqd-tcp-address={n.tcp_address}" for n in nodes] + \
                [f"--nsqd-http-address={n.http_address}" for n in nodes]
    single = archiver([sys.executable, "-m", "nsqpy.cli.nsq_to_parquet", f"--topic={topic}", "--channel=one",
                       *addresses, f"--output-dir={tmp_path / 'one'}", "--master=local[1]", "--available-now",
                       "--reader=executors", "--option=max_messages_per_partition=1000"])
    assert single.wait(120) == 0, single.output

    options = _executors_options(nodes, topic, tmp_path / "wal", max_messages_per_partition=1000)
    options["channel"] = "two"
    query = start_archive(spark, options, str(tmp_path / "two"), str(tmp_path / "ck"), available_now=True)
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(archived_bodies(spark, tmp_path / "one")) == sorted(bodies)
    assert sorted(archived_bodies(spark, tmp_path / "two")) == sorted(bodies)
    for channel in ("one", "two"):
        _assert_drained(nodes, topic, channel)


def test_reader_option_errors_name_the_option(spark, spark_nsqd, topic):
    reader = spark.readStream.format("nsq").options(**source_options(spark_nsqd, topic))
    with pytest.raises(Exception, match="option reader: 'banana' is not one of driver, executors, log"):
        reader.option("reader", "banana").load()
    with pytest.raises(Exception, match="option reader=executors needs walPath"):
        reader.option("reader", "executors").load()
