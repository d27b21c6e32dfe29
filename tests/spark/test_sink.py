"""DataFrames to topics: the nsq sink, batch and streaming, against a real nsqd."""

import collections

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from nsqpy.spark.archive import start_archive

from .conftest import source_options

pytestmark = pytest.mark.spark


def _read_back(spark, nsqd, topic, tmp_path, **options):
    """Everything on ``topic`` through the nsq source, archived and read back."""
    out = tmp_path / "readback"
    query = start_archive(spark, source_options(nsqd, topic, **options), str(out), str(tmp_path / "readback-ck"),
                          available_now=True)
    query.awaitTermination(120)
    assert query.exception() is None
    return spark.read.parquet(str(out))


def test_round_trip_dataframe_to_topic_to_dataframe(spark, spark_nsqd, topic, tmp_path):
    bodies = [f"row {i} {'x' * (i % 50)}" for i in range(3000)]
    frame = spark.createDataFrame([(b,) for b in bodies], "body string").repartition(3)
    frame.write.format("nsq").option("topic", topic).option("nsqd_tcp_addresses", spark_nsqd.tcp_address) \
        .option("mpub_max_messages", "200").mode("append").save()
    rows = _read_back(spark, spark_nsqd, topic, tmp_path)
    assert sorted(bytes(r.body).decode() for r in rows.select("body").collect()) == sorted(bodies)


def test_dedup_key_marks_every_row_once(spark, spark_nsqd, topic, tmp_path):
    frame = spark.createDataFrame([(bytes([i % 256]) * 3,) for i in range(1000)], "body binary").repartition(2)
    frame.write.format("nsq").options(topic=topic, nsqd_tcp_addresses=spark_nsqd.tcp_address, dedup_key="true",
                                      batch_id="7").mode("append").save()
    rows = _read_back(spark, spark_nsqd, topic, tmp_path, dedup_key="true").collect()
    keys = [r.dedup_key for r in rows]
    assert len(keys) == 1000 and len(set(keys)) == 1000
    assert {k.split(":")[0] for k in keys} == {"7"} and {k.split(":")[1] for k in keys} == {"0", "1"}
    assert collections.Counter(bytes(r.body) for r in rows) == collections.Counter(
        bytes([i % 256]) * 3 for i in range(1000))


def test_a_body_column_is_required_and_a_topic_is_only_appended_to(spark, spark_nsqd, topic):
    writer = spark.createDataFrame([(1,)], "value int").write.format("nsq").options(
        topic=topic, nsqd_tcp_addresses=spark_nsqd.tcp_address)
    with pytest.raises(Exception, match="publishes a column named body"):
        writer.mode("append").save()
    writer = spark.createDataFrame([("x",)], "body string").write.format("nsq").options(
        topic=topic, nsqd_tcp_addresses=spark_nsqd.tcp_address)
    with pytest.raises(Exception, match=r"cannot overwrite one: use mode\('append'\)"):
        writer.mode("overwrite").save()


def test_nsqd_down_fails_the_batch_and_the_restarted_query_publishes_it(spark, start_nsqd, topic, tmp_path):
    """A streaming write while nsqd is down fails the micro-batch with the
    reason; restarted from its checkpoint once nsqd is back, the same batch
    is published."""
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    bodies = [f"event {i}" for i in range(2000)]
    pq.write_table(pa.table({"body": bodies}), incoming / "part-0.parquet")
    gone = start_nsqd()  # only to have an address nothing listens on, then the same one back
    address = gone.tcp_address
    gone.stop()

    def start():
        return (spark.readStream.schema("body string").parquet(str(incoming)).writeStream.format("nsq")
                .options(topic=topic, nsqd_tcp_addresses=address, publish_timeout="5")
                .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())

    query = start()
    with pytest.raises(Exception, match=f"publishing to topic '{topic}' at nsqd {address} failed"):
        query.awaitTermination(120)

    nsqd = start_nsqd(f"--tcp-address={address}")
    query = start()
    query.awaitTermination(120)
    assert query.exception() is None
    rows = _read_back(spark, nsqd, topic, tmp_path)
    assert sorted(bytes(r.body).decode() for r in rows.select("body").collect()) == sorted(bodies)


def test_a_refused_publish_names_nsqd_and_its_error(spark, spark_nsqd, topic):
    frame = spark.createDataFrame([(b"x" * (2 << 20),)], "body binary")  # over nsqd's --max-msg-size
    with pytest.raises(Exception, match=f"publishing to topic '{topic}' at nsqd .* failed after 0 messages: "
                                        "E_BAD_MESSAGE"):
        frame.write.format("nsq").options(topic=topic, nsqd_tcp_addresses=spark_nsqd.tcp_address) \
            .mode("append").save()


def test_streaming_dedup_keys_carry_the_micro_batch_id(spark, spark_nsqd, topic, tmp_path):
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    for part in range(2):
        pq.write_table(pa.table({"body": [f"file {part} row {i}" for i in range(100)]}),
                       incoming / f"part-{part}.parquet")
    query = (spark.readStream.schema("body string").option("maxFilesPerTrigger", 1).parquet(str(incoming))
             .writeStream.format("nsq").options(topic=topic, nsqd_tcp_addresses=spark_nsqd.tcp_address,
                                                dedup_key="true")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    rows = _read_back(spark, spark_nsqd, topic, tmp_path, dedup_key="true").collect()
    batch_of = {bytes(r.body).decode(): r.dedup_key.split(":")[0] for r in rows}
    assert len(batch_of) == 200
    # one file per micro-batch: each file's rows carry the id of the batch that published them
    assert {batch_of[f"file {part} row {i}"] for part in range(2) for i in range(100)} == {"0", "1"}
    assert len({batch_of[f"file 0 row {i}"] for i in range(100)}) == 1
