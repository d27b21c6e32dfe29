"""NSQ -> Spark -> Parquet, and DataFrame -> NSQ, on this machine.

    python bench/spark_bench.py [--messages 500000] [--master local[*]]

Archive: ``--messages`` 200-byte messages wait in a channel; the archive job
(``nsq_to_parquet``'s query, availableNow) runs with batches of 10k and of
100k messages. Reported: messages/s end to end (query start to end, Spark's
query start-up included) and in steady state (rows over the batches' own
durations). nsqd runs at its defaults (``--max-rdy-count=2500``, a memory
queue of 10,000 and the rest on disk), as a new user's would: the source
opens as many connections as its batches need.

Streaming: the same backlog archived by the streaming query with
``nsq_to_parquet``'s defaults (trigger and batch size); reported: messages/s
from the first batch's start to the last one's end.

Sink: a DataFrame of ``--messages`` 200-byte binary bodies written with
``df.write.format("nsq")`` (MPUB 500 per request, 4 pipelined per task).
"""

import argparse
import datetime
import os
import statistics
import tempfile
import time
import urllib.request

from nsqpy.cli.nsq_to_parquet import DEFAULT_MAX_MESSAGES_PER_BATCH, DEFAULT_TRIGGER
from nsqpy.client.sync import SyncProducer
from nsqpy.localcluster import nsqd_process
from nsqpy.spark.archive import start_archive
from nsqpy.spark.session import build_session

BODY_SIZE = 200


def fill(nsqd, topic: str, count: int) -> None:
    """``count`` messages waiting for channel ``archive`` before the job starts."""
    for path in (f"topic/create?topic={topic}", f"channel/create?topic={topic}&channel=archive"):
        urllib.request.urlopen(urllib.request.Request(f"{nsqd.http_url}/{path}", method="POST")).read()
    body = b"x" * BODY_SIZE
    with SyncProducer(nsqd.tcp_address) as producer:
        for start in range(0, count, 1000):
            producer.multi_publish(topic, [body] * min(1000, count - start))


def archive(spark, nsqd, topic: str, per_batch: int, workdir: str) -> dict:
    options = {"topic": topic, "channel": "archive", "nsqd_tcp_addresses": nsqd.tcp_address,
               "nsqd_http_addresses": nsqd.http_address, "max_messages_per_batch": str(per_batch)}
    started = time.perf_counter()
    query = start_archive(spark, options, os.path.join(workdir, "out"), os.path.join(workdir, "ck"),
                          available_now=True)
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    if query.exception() is not None:
        raise SystemExit(f"archive failed: {query.exception()}")
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in batches)
    busy = sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000
    phases = {phase: statistics.median(p["durationMs"].get(phase, 0) for p in batches)
              for phase in ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets")}
    return {"rows": rows, "batches": len(batches), "end_to_end": rows / elapsed, "steady": rows / busy,
            "phases": phases}


def stream(spark, nsqd, topic: str, count: int, workdir: str) -> float:
    options = {"topic": topic, "channel": "archive", "nsqd_tcp_addresses": nsqd.tcp_address,
               "max_messages_per_batch": str(DEFAULT_MAX_MESSAGES_PER_BATCH)}
    query = start_archive(spark, options, os.path.join(workdir, "out"), os.path.join(workdir, "ck"),
                          trigger=DEFAULT_TRIGGER)
    try:
        deadline = time.monotonic() + 600
        while sum(p["numInputRows"] for p in query.recentProgress) < count:
            if not query.isActive or time.monotonic() > deadline:
                raise SystemExit(f"streaming archive stopped short: {query.exception()}")
            time.sleep(0.2)
        batches = [p for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    first = datetime.datetime.fromisoformat(batches[0]["timestamp"].replace("Z", "+00:00"))
    last = datetime.datetime.fromisoformat(batches[-1]["timestamp"].replace("Z", "+00:00"))
    seconds = (last - first).total_seconds() + batches[-1]["durationMs"]["triggerExecution"] / 1000
    return count / seconds


def sink(spark, nsqd, count: int) -> float:
    # built from Python: PySpark 4.3 does not find a Python data source when writing
    # a frame planned from spark.range() (DATA_SOURCE_NOT_FOUND)
    frame = spark.createDataFrame([(b"y" * BODY_SIZE,)] * count, "body binary").cache()
    frame.count()
    started = time.perf_counter()
    frame.write.format("nsq").option("topic", "sink_bench").option("nsqd_tcp_addresses", nsqd.tcp_address) \
        .mode("append").save()
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=500000)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--batch-sizes", default="10000,100000", help="comma-separated messages per batch "
                                                                     "(100,000 is nsq_to_parquet's default)")
    args = parser.parse_args()
    spark = build_session(args.master, "nsqpy-spark-bench")
    rows = []
    with tempfile.TemporaryDirectory() as data, nsqd_process(os.path.join(data, "nsqd")) as nsqd:
        rate = sink(spark, nsqd, args.messages)
        print(f"DataFrame -> nsqd: {rate:,.0f} msgs/s", flush=True)
        for per_batch in (int(size) for size in args.batch_sizes.split(",")):
            topic = f"bench_{per_batch}"
            fill(nsqd, topic, args.messages)
            result = archive(spark, nsqd, topic, per_batch, os.path.join(data, topic))
            rows.append((f"nsqd -> Parquet, availableNow, batches of {per_batch:,}", result))
            print(f"{rows[-1][0]}: {result['end_to_end']:,.0f} msgs/s end to end, "
                  f"{result['steady']:,.0f} msgs/s in batches ({result['batches']} batches; median ms per batch: "
                  + ", ".join(f"{phase} {ms:.0f}" for phase, ms in result["phases"].items()) + ")", flush=True)
        fill(nsqd, "bench_stream", args.messages)
        streaming = stream(spark, nsqd, "bench_stream", args.messages, os.path.join(data, "bench_stream"))
        print(f"nsqd -> Parquet, streaming, trigger {DEFAULT_TRIGGER}: {streaming:,.0f} msgs/s", flush=True)
    spark.stop()
    print()
    print(f"| run ({args.messages:,} x {BODY_SIZE} B, {args.master}) | msgs/s end to end | msgs/s in batches |")
    print("|---|---:|---:|")
    for label, result in rows:
        print(f"| {label} | {result['end_to_end']:,.0f} | {result['steady']:,.0f} |")
    print(f"| nsqd -> Parquet, streaming (trigger {DEFAULT_TRIGGER}, batches of "
          f"{DEFAULT_MAX_MESSAGES_PER_BATCH:,}) | | {streaming:,.0f} |")
    print(f"| DataFrame -> nsqd (write.format(\"nsq\")) | {rate:,.0f} | |")


if __name__ == "__main__":
    main()
