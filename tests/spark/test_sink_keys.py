"""The nsq sink's keyed publishes: a write that fails part-way, run again
(a batch write rerun with the same key_prefix, a streaming query restarted
from its checkpoint), leaves each row on the topic once."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.functions import col, udf

from tests.support.wire import WireConn, http, http_json

pytestmark = pytest.mark.spark

ROWS = 30_000
FAIL_AT = 25_000  # the first run fails here, once the rows before it have begun to reach the topic


def fails_once_at(marker, row: int, watch_url: str):
    """A body column passed through; the first run to reach ``row`` fails (``marker`` notes it),
    after waiting (at most a minute) until ``watch_url`` (nsqd's topic stats) shows the topic holding a message, so the
    failed run has published part of its rows whatever the pipeline's buffering and timing."""
    @udf("string")
    def through(body):
        if body == f"row {row:05d}" and not marker.exists():
            import json
            import time
            import urllib.request
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with urllib.request.urlopen(watch_url, timeout=10) as answer:
                    if json.load(answer)["topics"][0]["message_count"] > 0:
                        break
                time.sleep(0.1)
            marker.write_text("failed once")
            raise RuntimeError(f"injected failure at {body}")
        return body
    return through


def received(nsqd, topic: str) -> list[bytes]:
    with WireConn(nsqd.tcp_hostport) as conn:
        conn.subscribe(topic, "check", rdy=2500)
        return conn.drain(quiet=2)


def stats_url(nsqd, topic: str) -> str:
    return f"{nsqd.http_url}/stats?format=json&topic={topic}"


def queued(nsqd, topic: str) -> int:
    """Messages the topic has taken: what a failed run had published before it failed."""
    _, stats = http_json("GET", stats_url(nsqd, topic))
    return stats["topics"][0]["message_count"]


def create_channel(nsqd, topic: str) -> None:
    assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    assert http("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel=check")[0] == 200


def test_a_batch_write_run_again_with_its_key_prefix_publishes_each_row_once(spark, spark_nsqd, topic, tmp_path):
    create_channel(spark_nsqd, topic)
    bodies = [f"row {i:05d}" for i in range(ROWS)]
    frame = spark.createDataFrame([(b,) for b in bodies], "body string").coalesce(1)
    through = fails_once_at(tmp_path / "failed", FAIL_AT, stats_url(spark_nsqd, topic))
    failing = frame.select(through(col("body")).alias("body"))
    options = dict(topic=topic, nsqd_tcp_addresses=spark_nsqd.tcp_address, publish_keys="true",
                   key_prefix="nightly-2026-11-29")
    with pytest.raises(Exception, match="injected failure"):
        failing.write.format("nsq").options(**options).mode("append").save()
    assert 0 < queued(spark_nsqd, topic) < ROWS
    failing.write.format("nsq").options(**options).mode("append").save()
    got = received(spark_nsqd, topic)
    assert sorted(got) == [b.encode() for b in bodies]


def test_a_key_column_names_each_rows_key(spark, spark_nsqd, topic):
    create_channel(spark_nsqd, topic)
    frame = spark.createDataFrame([("order 1", "o-1"), ("order 2", "o-2"), ("order 1 again", "o-1")],
                                  "body string, order_id string").coalesce(1)
    for _ in range(2):
        frame.write.format("nsq").options(topic=topic, nsqd_tcp_addresses=spark_nsqd.tcp_address,
                                          key_column="order_id").mode("append").save()
    assert sorted(received(spark_nsqd, topic)) == [b"order 1", b"order 2"]


def test_keys_need_a_prefix_on_a_batch_write(spark, spark_nsqd, topic):
    frame = spark.createDataFrame([("x",)], "body string")
    with pytest.raises(Exception, match="publish_keys on a batch write needs key_prefix"):
        frame.write.format("nsq").options(topic=topic, nsqd_tcp_addresses=spark_nsqd.tcp_address,
                                          publish_keys="true").mode("append").save()


def test_a_streaming_query_restarted_from_its_checkpoint_publishes_each_row_once(spark, spark_nsqd, topic,
                                                                                 tmp_path):
    create_channel(spark_nsqd, topic)
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    bodies = [f"row {i:05d}" for i in range(ROWS)]
    pq.write_table(pa.table({"body": bodies}), incoming / "part-0.parquet")
    through = fails_once_at(tmp_path / "failed", FAIL_AT, stats_url(spark_nsqd, topic))

    def start():
        stream = spark.readStream.schema("body string").parquet(str(incoming))
        return (stream.select(through(col("body")).alias("body")).writeStream.format("nsq")
                .options(topic=topic, nsqd_tcp_addresses=spark_nsqd.tcp_address, publish_keys="true")
                .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())

    query = start()
    with pytest.raises(Exception, match="injected failure"):
        query.awaitTermination(180)
    assert 0 < queued(spark_nsqd, topic) < ROWS
    query = start()
    query.awaitTermination(180)
    assert query.exception() is None
    assert sorted(received(spark_nsqd, topic)) == [b.encode() for b in bodies]
