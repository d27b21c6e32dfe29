"""The log reader: a retained topic read by offset in a real local Spark,
streaming and batch, as Spark reads Kafka."""

import json
import time

import pytest
from pyspark.errors import StreamingQueryException

from tests.support.wire import http, http_json, wait_until

from .conftest import archived_bodies, publish

pytestmark = pytest.mark.spark


def retain(nsqd, topic: str, **settings) -> None:
    assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    query = "&".join(f"{key}={value}" for key, value in {"retention": "1h", **settings}.items())
    assert http("POST", f"{nsqd.http_url}/topic/config?topic={topic}&{query}")[0] == 200


def log_options(nsqd, topic: str, **extra) -> dict:
    return {"topic": topic, "nsqd_tcp_addresses": nsqd.tcp_address, "nsqd_http_addresses": nsqd.http_address,
            **{key: str(value) for key, value in extra.items()}}


def run_available_now(spark, options: dict, out, checkpoint):
    query = (spark.readStream.format("nsq").options(**options).load().writeStream.format("parquet")
             .option("path", str(out)).option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
             .start())
    try:
        query.awaitTermination(180)
    except StreamingQueryException:
        pass  # the caller looks at query.exception()
    return query


def test_a_retained_topic_streams_by_offset_exactly_once_and_resumes(spark, spark_nsqd, topic, tmp_path):
    retain(spark_nsqd, topic)
    bodies = [f"{topic}-{i:05d}".encode() for i in range(3000)]
    publish(spark_nsqd, topic, bodies)
    options = log_options(spark_nsqd, topic, max_messages_per_partition=700, startingOffsets="earliest")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = run_available_now(spark, options, out, checkpoint)
    assert query.exception() is None
    rows = spark.read.parquet(str(out)).orderBy("offset").collect()
    assert [row.offset for row in rows] == list(range(3000))
    assert [bytes(row.body) for row in rows] == bodies
    assert {row.attempts for row in rows} == {None} and {row.topic for row in rows} == {topic}
    assert {row.nsqd_address for row in rows} == {spark_nsqd.tcp_address}
    end = json.loads(query.lastProgress["sources"][0]["endOffset"])
    assert end == {"offsets": {spark_nsqd.tcp_address: 3000}, "skipped": 0}

    more = [f"{topic}-more-{i:03d}".encode() for i in range(500)]
    publish(spark_nsqd, topic, more)
    assert run_available_now(spark, options, out, checkpoint).exception() is None
    assert sorted(archived_bodies(spark, out)) == sorted(bodies + more)  # each once
    _, stats = http_json("GET", f"{spark_nsqd.http_url}/stats?format=json&topic={topic}")
    assert stats["topics"][0]["channels"] == []  # no channel, nothing delivered, nothing FINished


def test_batch_reads_take_a_range_by_offsets_or_by_time(spark, spark_nsqd, topic):
    retain(spark_nsqd, topic)
    early = [f"early-{i:04d}".encode() for i in range(1000)]
    late = [f"late-{i:04d}".encode() for i in range(1000)]
    publish(spark_nsqd, topic, early)
    time.sleep(0.05)
    middle_ms = time.time_ns() // 1_000_000
    time.sleep(0.05)
    publish(spark_nsqd, topic, late)
    node = spark_nsqd.tcp_address

    def read(**extra):
        rows = (spark.read.format("nsq").options(**log_options(spark_nsqd, topic, max_messages_per_partition=300,
                                                               **extra)).load().orderBy("offset").collect())
        return [bytes(row.body) for row in rows]

    assert read() == early + late  # a batch read starts at the earliest offset
    assert read(startingOffsets=json.dumps({node: 100}), endingOffsets=json.dumps({node: 250})) == early[100:250]
    assert read(startingTimestamp=middle_ms) == late
    assert read(endingTimestamp=middle_ms) == early
    assert read(startingOffsets=json.dumps({node: -1})) == []  # latest: nothing


def test_reader_log_on_a_plain_topic_fails_load_in_one_line(spark, spark_nsqd, topic):
    assert http("POST", f"{spark_nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    options = log_options(spark_nsqd, topic, reader="log")
    with pytest.raises(Exception) as failure:
        spark.readStream.format("nsq").options(**options).load()
    message = str(failure.value)
    assert f"topic {topic} is not retained on nsqd {spark_nsqd.tcp_address}" in message
    assert "retention=24h" in message
    with pytest.raises(Exception) as failure:  # without a channel, there is no other way to read it
        spark.readStream.format("nsq").options(**log_options(spark_nsqd, topic)).load()
    assert "option channel: missing (the topic is not retained on every nsqd" in str(failure.value)
    with pytest.raises(Exception) as failure:
        spark.read.format("nsq").options(**log_options(spark_nsqd, topic, channel="c")).load().count()
    assert "reads retained topics only" in str(failure.value)


@pytest.mark.parametrize("value", ["yesterday", '{"127.0.0.1:4150": "x"}', "[1, 2]"])
def test_bad_starting_offsets_fail_load_in_one_line(spark, spark_nsqd, topic, value):
    retain(spark_nsqd, topic)
    with pytest.raises(Exception) as failure:
        spark.readStream.format("nsq").options(**log_options(spark_nsqd, topic, startingOffsets=value)).load()
    assert "option startingoffsets: expected earliest, latest or JSON" in str(failure.value)


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_offsets_removed_before_they_were_read(spark, topic, tmp_path, start_nsqd, fail_on_data_loss):
    nsqd = start_nsqd("--max-bytes-per-file=8192")
    retain(nsqd, topic)
    bodies = [f"{topic}-{i:05d}-".encode() + b"." * 100 for i in range(2000)]
    publish(nsqd, topic, bodies[:300])
    options = log_options(nsqd, topic, startingOffsets="earliest", failOnDataLoss=str(fail_on_data_loss).lower(),
                          maxOffsetsPerTrigger=500)  # (the gap is counted once, however many batches follow)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    assert run_available_now(spark, options, out, checkpoint).exception() is None
    publish(nsqd, topic, bodies[300:])
    assert http("POST", f"{nsqd.http_url}/topic/config?topic={topic}&retention_bytes=60000")[0] == 200
    wait_until(lambda: http_json("GET", f"{nsqd.http_url}/topic/offsets?topic={topic}")[1]["earliest_offset"] > 300)
    earliest = http_json("GET", f"{nsqd.http_url}/topic/offsets?topic={topic}")[1]["earliest_offset"]
    query = run_available_now(spark, options, out, checkpoint)
    if fail_on_data_loss:
        assert query.exception() is not None
        assert (f"offsets 300-{earliest - 1} of topic {topic} on nsqd {nsqd.tcp_address} were removed by retention"
                in str(query.exception()))
        assert sorted(archived_bodies(spark, out)) == bodies[:300]
    else:
        assert query.exception() is None
        assert sorted(archived_bodies(spark, out)) == bodies[:300] + bodies[earliest:]
        skipped = [json.loads(p["sources"][0]["endOffset"])["skipped"] for p in query.recentProgress]
        assert max(skipped) == earliest - 300


def test_a_node_found_later_is_read_from_its_earliest_offset(spark, topic, tmp_path, start_nsqd, start_lookupd):
    lookupd = start_lookupd()
    first = start_nsqd("--retention=1h", f"--lookupd-tcp-address={lookupd.tcp_address}")
    publish(first, topic, [b"a-%04d" % i for i in range(500)])
    wait_until(lambda: (http_json("GET", f"{lookupd.http_url}/lookup?topic={topic}")[1] or {}).get("producers"))
    options = {"topic": topic, "lookupd_http_addresses": lookupd.http_address, "startingOffsets": "earliest"}
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = (spark.readStream.format("nsq").options(**options).load().writeStream.format("parquet")
             .option("path", str(out)).option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="300 milliseconds").start())
    try:
        wait_until(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 500, timeout=120)
        second = start_nsqd("--retention=1h", f"--lookupd-tcp-address={lookupd.tcp_address}")
        publish(second, topic, [b"b-%04d" % i for i in range(400)])
        wait_until(lambda: len({p["batchId"] for p in query.recentProgress}) and
                   json.loads(query.lastProgress["sources"][0]["endOffset"])["offsets"].get(second.tcp_address) == 400,
                   timeout=120)
        query.processAllAvailable()
    finally:
        query.stop()
    expected = [b"a-%04d" % i for i in range(500)] + [b"b-%04d" % i for i in range(400)]
    assert sorted(archived_bodies(spark, out)) == expected
