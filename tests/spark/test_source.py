"""The nsq source in a real local Spark against a real nsqd."""

import collections
import threading
import time

import pytest

from nsqpy.localcluster import free_port
from nsqpy.spark.archive import drain_file, start_archive, stop_gracefully
from nsqpy.spark.fetcher import Fetcher
from nsqpy.spark.ledger import offset
from nsqpy.spark.options import SourceOptions
from nsqpy.spark.source import NSQStreamReader

from tests.support.wire import http_json, wait_until

from .conftest import (archive_available_now, archived_bodies, channel_stats, committed_bodies, publish, source_options,
                       starve_until_timed_out, wait_for_registration)

pytestmark = pytest.mark.spark


def _bodies(topic: str, count: int) -> list[bytes]:
    return [f"{topic}-{i:06d}".encode() for i in range(count)]


def _wait_for_rows(query, rows: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while sum(p["numInputRows"] for p in query.recentProgress) < rows:
        assert query.isActive, f"query ended: {query.exception()}"
        assert time.monotonic() < deadline, "no progress in time"
        time.sleep(0.1)


def test_available_now_archives_every_message_once_and_acknowledges_it(spark, spark_nsqd, topic, tmp_path):
    bodies = _bodies(topic, 5000)
    publish(spark_nsqd, topic, bodies)
    batches = archive_available_now(spark, source_options(spark_nsqd, topic, max_messages_per_batch=1500),
                                    tmp_path / "out", tmp_path / "checkpoint")
    assert sorted(archived_bodies(spark, tmp_path / "out")) == bodies
    assert sorted(committed_bodies(tmp_path / "out")) == bodies  # the session-free reader agrees
    assert batches == [1500, 1500, 1500, 500]
    stats = channel_stats(spark_nsqd, topic, "archive")
    assert (stats["depth"], stats["in_flight_count"], stats["timeout_count"]) == (0, 0, 0)

    rows = spark.read.parquet(str(tmp_path / "out"))
    assert set(rows.columns) == {"id", "body", "timestamp", "attempts", "topic", "nsqd_address", "date", "hour"}
    first = rows.orderBy("body").first()
    assert (first.topic, first.attempts, first.nsqd_address) == (topic, 1, spark_nsqd.tcp_address)
    assert len(first.id) == 16
    # partitioned by the message's timestamp (UTC): date=YYYY-MM-DD/hour=HH
    assert (str(first.date), first.hour) == (first.timestamp.strftime("%Y-%m-%d"), first.timestamp.hour)


def test_a_batch_slower_than_the_message_timeout_is_kept_in_flight(spark, spark_nsqd, topic, tmp_path):
    """nsqd's --msg-timeout is 3 s here; the first batch takes 7 s to write.
    TOUCH keeps its messages ours: none times out, none comes twice."""
    bodies = _bodies(topic, 300)
    publish(spark_nsqd, topic, bodies)
    out = str(tmp_path / "out")

    def slow_write(batch, batch_id):
        if batch_id == 0:
            time.sleep(7)
        batch.select("body").write.mode("append").parquet(out)

    query = (spark.readStream.format("nsq").options(**source_options(spark_nsqd, topic, max_messages_per_batch=200))
             .load().writeStream.foreachBatch(slow_write).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(archived_bodies(spark, out)) == bodies
    stats = channel_stats(spark_nsqd, topic, "archive")
    assert (stats["timeout_count"], stats["in_flight_count"], stats["depth"]) == (0, 0, 0)


def test_a_message_that_timed_out_while_its_batch_was_held_is_archived_once(start_nsqd, topic):
    """Spark's calls made by hand, on a machine too busy for the reader's
    TOUCHes: its event loop is starved past nsqd's --msg-timeout while batch
    0 is held, so nsqd delivers batch 0 again on the same connection, and
    the commit's FINs finish those copies. The next read drops the copies
    instead of archiving them a second time."""
    nsqd = start_nsqd("--msg-timeout=1s")
    bodies = _bodies(topic, 50)
    publish(nsqd, topic, bodies)
    reader = NSQStreamReader(SourceOptions.parse(source_options(nsqd, topic, max_messages_per_batch=50)))
    try:
        rows, end = reader.read(offset(0))
        assert sorted(body for batch in rows for body in batch.column("body").to_pylist()) == bodies
        starve_until_timed_out(reader._fetcher, nsqd, topic, 50)
        wait_until(lambda: reader._fetcher.waiting() >= 50, timeout=30)  # the copies
        reader.commit(end)
        rows, after = reader.read(end)
        assert (list(rows), after) == ([], end)
        stats = channel_stats(nsqd, topic, "archive")
        assert (stats["depth"], stats["in_flight_count"]) == (0, 0)
    finally:
        reader.stop()


def test_graceful_stop_with_messages_in_flight_then_restart_loses_and_repeats_nothing(
        spark, spark_nsqd, topic, tmp_path):
    bodies = _bodies(topic, 4000)
    publish(spark_nsqd, topic, bodies)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    options = source_options(spark_nsqd, topic, max_messages_per_batch=400)
    query = start_archive(spark, options, out, checkpoint, trigger="200 milliseconds")
    _wait_for_rows(query, 400)
    assert stop_gracefully(query, drain_file(checkpoint))

    archived = archived_bodies(spark, out)
    stats = channel_stats(spark_nsqd, topic, "archive")
    # everything archived is acknowledged and nothing else: the rest waits at nsqd
    assert stats["in_flight_count"] == 0
    assert 400 <= len(archived) < 4000 and stats["depth"] == 4000 - len(archived)

    query = start_archive(spark, options, out, checkpoint, available_now=True)
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(archived_bodies(spark, out)) == bodies
    assert channel_stats(spark_nsqd, topic, "archive")["depth"] == 0


def test_graceful_stop_says_when_the_source_never_confirmed(spark, spark_nsqd, topic, tmp_path):
    """A query whose source was not given the drain file cannot confirm: it is
    stopped anyway, and the caller is told."""
    query = (spark.readStream.format("nsq").options(**source_options(spark_nsqd, topic)).load()
             .writeStream.format("memory").queryName(topic).start())
    assert not stop_gracefully(query, str(tmp_path / "drain"), timeout=1).confirmed
    assert not query.isActive


def test_abrupt_stop_with_a_write_ahead_log_replays_exactly(spark, spark_nsqd, topic, tmp_path):
    """query.stop() mid-stream (no drain): nsqd gets back what was in flight;
    the restart replays the logged batch and drops redeliveries of what the
    sink already has, so the archive holds every message exactly once."""
    bodies = _bodies(topic, 4000)
    publish(spark_nsqd, topic, bodies)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    options = source_options(spark_nsqd, topic, max_messages_per_batch=300, walPath=str(tmp_path / "wal"))
    query = start_archive(spark, options, out, checkpoint, trigger="0 seconds")
    _wait_for_rows(query, 900)
    query.stop()

    query = start_archive(spark, options, out, checkpoint, available_now=True)
    query.awaitTermination(120)
    assert query.exception() is None
    archived = archived_bodies(spark, out)
    duplicates = {body: n for body, n in collections.Counter(archived).items() if n > 1}
    assert set(archived) == set(bodies)
    assert not duplicates
    assert channel_stats(spark_nsqd, topic, "archive")["in_flight_count"] == 0


def test_bad_options_fail_load_with_one_clear_message(spark, spark_nsqd, topic):
    reader = spark.readStream.format("nsq").option("topic", topic).option("nsqd_tcp_addresses",
                                                                          spark_nsqd.tcp_address)
    with pytest.raises(Exception, match="option channel: missing"):
        reader.load()
    with pytest.raises(Exception, match="max_messages_per_batch: expected int, got 'many'"):
        reader.option("channel", "c").option("max_messages_per_batch", "many").load()


def test_process_all_available_with_the_default_trigger(spark, spark_nsqd, topic):
    publish(spark_nsqd, topic, _bodies(topic, 700))
    query = (spark.readStream.format("nsq").options(**source_options(spark_nsqd, topic, max_messages_per_batch=250))
             .load().writeStream.format("memory").queryName(topic).start())
    try:
        query.processAllAvailable()
        assert spark.table(topic).count() == 700
        publish(spark_nsqd, topic, _bodies(topic + "-more", 50))
        query.processAllAvailable()
        assert spark.table(topic).count() == 750
    finally:
        query.stop()


def test_nodes_found_through_nsqlookupd(spark, start_lookupd, start_nsqd, topic, tmp_path):
    """Two nsqd registered with nsqlookupd: the source finds both (and their
    HTTP addresses, for what "available now" means) from the lookupd alone."""
    lookupd = start_lookupd()
    nodes = [start_nsqd(f"--lookupd-tcp-address={lookupd.tcp_address}") for _ in range(2)]
    for i, node in enumerate(nodes):
        publish(node, topic, [f"node{i}-{n}".encode() for n in range(400)])
    wait_for_registration(lookupd, topic, 2)
    options = {"topic": topic, "channel": "archive", "lookupd_http_addresses": lookupd.http_address}
    query = start_archive(spark, options, str(tmp_path / "out"), str(tmp_path / "ck"), available_now=True)
    query.awaitTermination(120)
    assert query.exception() is None
    archived = archived_bodies(spark, tmp_path / "out")
    assert sorted(archived) == sorted(f"node{i}-{n}".encode() for i in range(2) for n in range(400))
    addresses = {r.nsqd_address for r in spark.read.parquet(str(tmp_path / "out")).select("nsqd_address").collect()}
    assert addresses == {node.tcp_address for node in nodes}


@pytest.mark.parametrize("wal", [True, False], ids=["write-ahead-log", "no-log"])
def test_a_batch_that_failed_is_replayed_on_restart(spark, spark_nsqd, topic, tmp_path, wal):
    """Batch 1 fails in the sink after Spark logged its offsets. The restart
    replays it: with the log, the very same messages, and their redeliveries
    are dropped; without it, an empty batch, and nsqd's redeliveries come in
    later batches. Either way every message lands exactly once."""
    bodies = _bodies(topic, 900)
    publish(spark_nsqd, topic, bodies)
    options = source_options(spark_nsqd, topic, max_messages_per_batch=300)
    if wal:
        options["walPath"] = str(tmp_path / "wal")
    seen: dict[int, list] = {}

    def run(sink):
        query = (spark.readStream.format("nsq").options(**options).load().writeStream.foreachBatch(sink)
                 .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
        try:
            query.awaitTermination(120)
        except Exception:  # the failure is asserted through query.exception()
            pass
        return query

    def failing_sink(batch, batch_id):
        if batch_id == 1:
            seen["failed"] = sorted(r.id for r in batch.select("id").collect())
            raise RuntimeError("sink down")
        batch.select("id", "body").write.mode("append").parquet(str(tmp_path / f"out/batch={batch_id}"))

    assert "sink down" in str(run(failing_sink).exception())
    assert len(seen["failed"]) == 300

    def sink(batch, batch_id):
        seen.setdefault(batch_id, sorted(r.id for r in batch.select("id").collect()))
        batch.select("id", "body").write.mode("append").parquet(str(tmp_path / f"out/batch={batch_id}"))

    assert run(sink).exception() is None
    assert seen[1] == (seen["failed"] if wal else [])
    assert sorted(archived_bodies(spark, tmp_path / "out")) == bodies
    stats = channel_stats(spark_nsqd, topic, "archive")
    assert (stats["depth"], stats["in_flight_count"]) == (0, 0)


def test_nsqd_restarting_mid_stream_loses_and_repeats_nothing(spark, start_nsqd, topic, tmp_path):
    """nsqd stops (cleanly: it keeps what was in flight) and comes back while
    batches run. Messages of a batch whose connection closed before its FIN
    are redelivered by nsqd; the source drops those copies, and takes the copy
    of anything it had received but not yet batched."""
    bodies = _bodies(topic, 3000)
    data = tmp_path / "nsqd"
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    nsqd = start_nsqd("--max-rdy-count=20000", data_path=data)
    address = nsqd.tcp_address
    publish(nsqd, topic, bodies)
    query = start_archive(spark, {"topic": topic, "channel": "archive", "nsqd_tcp_addresses": address,
                                  "max_messages_per_batch": "300"}, out, checkpoint, trigger="100 milliseconds")
    _wait_for_rows(query, 600)
    nsqd.stop()
    nsqd = start_nsqd(f"--tcp-address={address}", "--max-rdy-count=20000", data_path=data)
    deadline = time.monotonic() + 60
    while channel_stats(nsqd, topic, "archive").get("depth", 1) or query.lastProgress["numInputRows"]:
        assert query.isActive and time.monotonic() < deadline, f"not drained: {query.exception()}"
        time.sleep(0.2)
    assert stop_gracefully(query, drain_file(checkpoint))
    assert channel_stats(nsqd, topic, "archive")["in_flight_count"] == 0
    archived = archived_bodies(spark, out)
    assert sorted(archived) == bodies


def test_a_batch_fills_past_one_connections_cap_with_nsqd_at_its_defaults(spark, start_nsqd, topic, tmp_path):
    """nsqd's default --max-rdy-count (2500) caps one connection; the source
    opens as many connections as its batches need, so one batch holds 6000."""
    nsqd = start_nsqd()
    bodies = _bodies(topic, 7000)
    publish(nsqd, topic, bodies)
    batches = archive_available_now(spark, source_options(nsqd, topic, max_messages_per_batch=6000),
                                    tmp_path / "out", tmp_path / "ck")
    assert batches == [6000, 1000]
    assert sorted(archived_bodies(spark, tmp_path / "out")) == bodies
    stats = channel_stats(nsqd, topic, "archive")
    assert (stats["depth"], stats["in_flight_count"]) == (0, 0)
    assert len(http_json("GET", f"{nsqd.http_url}/stats?format=json&topic={topic}")[1]["topics"][0]
               ["channels"][0]["clients"]) == 0  # every connection closed at the end


def test_the_reader_waits_for_an_nsqd_that_is_still_starting(start_nsqd, topic, tmp_path):
    """The driver reader's first connection is tried again for a while (an
    nsqd restarting, or slow to accept on a busy machine) instead of
    failing the query at once."""
    port = free_port()
    options = SourceOptions.parse({"topic": topic, "channel": "archive",
                                   "nsqd_tcp_addresses": f"127.0.0.1:{port}"})
    starter = threading.Timer(1.5, lambda: start_nsqd(f"--tcp-address=127.0.0.1:{port}"))
    starter.start()
    try:
        fetcher = Fetcher(options)
        fetcher.close()
    finally:
        starter.join()
