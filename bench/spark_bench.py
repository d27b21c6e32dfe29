"""NSQ -> Spark -> Parquet, and DataFrame -> NSQ, on this machine.

    python bench/spark_bench.py [--messages 500000] [--master local[*]] [--nodes 1]
                                [--readers driver,executors]
    python bench/spark_bench.py --scaling [--messages 100000]
    python bench/spark_bench.py --standalone [--archive-only] [--nodes 2]

Archive: ``--messages`` 200-byte messages wait in a channel, spread over
``--nodes`` nsqd; the archive job (``nsq_to_parquet``'s query, availableNow)
runs with each reader (``reader=driver``: one consumer in Spark's driver;
``reader=executors``: partitions read by the tasks; ``reader=log``: the
backlog in a retained topic, read by offset) and batches of 10k and of
100k messages. Reported: messages/s end to end (query start to end,
Spark's query start-up included) and in steady state (rows over the
batches' own durations). nsqd runs at its defaults (``--max-rdy-count=2500``,
a memory queue of 10,000 and the rest on disk), as a new user's would: the
source opens as many connections as its batches need.

Scaling (``--scaling``): the availableNow archive of ``--messages`` over two
nsqd, batches of 100,000, each reader, run on ``local[1]`` and on
``local[2]`` (a process each, as a master is fixed for a JVM's life); the
table gives both and the ratio.

Standalone (``--standalone``): the same runs on a Spark standalone cluster
this benchmark starts from the pyspark install on 127.0.0.1 and stops at the
end: one master and two workers of one core each (``--master`` is then
that cluster's URL; any other ``spark://`` URL works with ``--master`` too).

Streaming: the same backlog archived by the streaming query with
``nsq_to_parquet``'s defaults (trigger and batch size); reported: messages/s
from the first batch's start to the last one's end.

Sink: a DataFrame of ``--messages`` 200-byte binary bodies written with
``df.write.format("nsq")`` (MPUB 500 per request, 4 pipelined per task).
"""

import argparse
import contextlib
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))  # the test suite's standalone cluster
from nsqpy.cli.nsq_to_parquet import DEFAULT_MAX_MESSAGES_PER_BATCH, DEFAULT_TRIGGER  # noqa: E402
from nsqpy.client.sync import SyncProducer  # noqa: E402
from nsqpy.localcluster import nsqd_process  # noqa: E402
from nsqpy.spark.archive import input_rows, start_archive  # noqa: E402
from nsqpy.spark.session import build_session  # noqa: E402
from tests.spark.standalone import standalone_cluster  # noqa: E402

BODY_SIZE = 200


def fill(nsqd, topic: str, count: int, retained: bool = False) -> None:
    """``count`` messages waiting for channel ``archive`` before the job
    starts (``retained``: in the topic's log, read by offset, no channel)."""
    paths = ([f"topic/create?topic={topic}", f"topic/config?topic={topic}&retention=1h"] if retained
             else [f"topic/create?topic={topic}", f"channel/create?topic={topic}&channel=archive"])
    for path in paths:
        urllib.request.urlopen(urllib.request.Request(f"{nsqd.http_url}/{path}", method="POST")).read()
    body = b"x" * BODY_SIZE
    with SyncProducer(nsqd.tcp_address) as producer:
        for start in range(0, count, 1000):
            producer.multi_publish(topic, [body] * min(1000, count - start))


def fill_evenly(nodes, topic: str, count: int, retained: bool = False) -> None:
    """``count`` messages waiting, shared out over ``nodes``."""
    for i, nsqd in enumerate(nodes):
        fill(nsqd, topic, count // len(nodes) + (i < count % len(nodes)), retained)


def archive(spark, nodes, topic: str, per_batch: int, reader: str, workdir: str) -> dict:
    options = {"topic": topic, "channel": "archive", "reader": reader,
               "nsqd_tcp_addresses": ",".join(nsqd.tcp_address for nsqd in nodes),
               "nsqd_http_addresses": ",".join(nsqd.http_address for nsqd in nodes),
               "max_messages_per_batch": str(per_batch)}
    if reader == "log":  # a retained topic, by offset, from its start (max_messages_per_batch caps its batches too)
        options["startingOffsets"] = "earliest"
    return run_to_end(lambda: start_archive(spark, options, os.path.join(workdir, "out"),
                                            os.path.join(workdir, "ck"), available_now=True))


PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets", "triggerExecution")


def run_to_end(start) -> dict:
    """Start an availableNow query and run it to its end: msgs/s end to end
    (start to end) and in batches (rows over the batches' own durations),
    and the median milliseconds of each phase of a batch."""
    started = time.perf_counter()
    query = start()
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    batches = [p for p in query.recentProgress if input_rows(p)]
    rows = sum(input_rows(p) for p in batches)
    busy = sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000
    phases = {phase: statistics.median(p["durationMs"].get(phase, 0) for p in batches) for phase in PHASES}
    return {"rows": rows, "batches": len(batches), "end_to_end": rows / elapsed, "steady": rows / busy,
            "busy": busy, "phases": phases}


def stream(spark, nsqd, topic: str, count: int, workdir: str) -> float:
    options = {"topic": topic, "channel": "archive", "nsqd_tcp_addresses": nsqd.tcp_address,
               "max_messages_per_batch": str(DEFAULT_MAX_MESSAGES_PER_BATCH)}
    query = start_archive(spark, options, os.path.join(workdir, "out"), os.path.join(workdir, "ck"),
                          trigger=DEFAULT_TRIGGER)
    try:
        deadline = time.monotonic() + 600
        while sum(input_rows(p) for p in query.recentProgress) < count:
            if not query.isActive or time.monotonic() > deadline:
                raise SystemExit(f"streaming archive stopped short: {query.exception()}")
            time.sleep(0.2)
        batches = [p for p in query.recentProgress if input_rows(p)]
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


def archive_runs(spark, nodes, messages: int, readers, batch_sizes, workdir: str) -> list[tuple[str, dict]]:
    """The availableNow archive of a fresh backlog for each reader and batch size."""
    rows = []
    for reader in readers:
        for per_batch in batch_sizes:
            topic = f"bench_{reader}_{per_batch}"
            fill_evenly(nodes, topic, messages, retained=reader == "log")
            result = archive(spark, nodes, topic, per_batch, reader, os.path.join(workdir, topic))
            rows.append((f"nsqd -> Parquet, availableNow, reader={reader}, batches of {per_batch:,}", result))
            print(f"{rows[-1][0]}: {result['end_to_end']:,.0f} msgs/s end to end, "
                  f"{result['steady']:,.0f} msgs/s in batches ({result['batches']} batches; median ms per batch: "
                  + ", ".join(f"{phase} {ms:.0f}" for phase, ms in result["phases"].items()) + ")", flush=True)
    return rows


@contextlib.contextmanager
def nsqd_nodes(data: str, count: int):
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(nsqd_process(os.path.join(data, f"nsqd{i}"))) for i in range(count)]


def scaling(messages: int) -> None:
    """This benchmark on local[1], then on local[2], over two nsqd (a child process each)."""
    results = {}
    for master in ("local[1]", "local[2]"):
        print(f"running on {master} ...", flush=True)
        child = subprocess.run([sys.executable, __file__, "--master", master, "--nodes", "2", "--messages",
                                str(messages), "--batch-sizes", "100000", "--archive-only", "--json"],
                               capture_output=True, text=True, check=False)
        lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
        if child.returncode or not lines:
            raise SystemExit(f"the {master} run failed:\n{child.stdout[-3000:]}{child.stderr[-3000:]}")
        results[master] = json.loads(lines[-1])
    print()
    print(f"| availableNow, {messages:,} x {BODY_SIZE} B over 2 nsqd, batches of 100,000 | local[1] msgs/s | "
          f"local[2] msgs/s | local[2] / local[1] |")
    print("|---|---:|---:|---:|")
    for label in results["local[1]"]:
        one, two = results["local[1]"][label], results["local[2]"][label]
        print(f"| {label.split(', ')[2]}, end to end | {one['end_to_end']:,.0f} | {two['end_to_end']:,.0f} | "
              f"{two['end_to_end'] / one['end_to_end']:.2f} |")
        print(f"| {label.split(', ')[2]}, in batches | {one['steady']:,.0f} | {two['steady']:,.0f} | "
              f"{two['steady'] / one['steady']:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=500000)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--nodes", type=int, default=1, help="nsqd nodes the backlog is spread over")
    parser.add_argument("--readers", default="driver,executors,log",
                        help="comma-separated: driver, executors, log (a retained topic, by offset)")
    parser.add_argument("--batch-sizes", default="10000,100000", help="comma-separated messages per batch "
                                                                     "(100,000 is nsq_to_parquet's default)")
    parser.add_argument("--archive-only", action="store_true", help="no sink and no streaming run")
    parser.add_argument("--json", action="store_true", help="end with the archive results as one JSON line")
    parser.add_argument("--scaling", action="store_true", help="local[1] against local[2] over two nsqd")
    parser.add_argument("--standalone", action="store_true",
                        help="run on a standalone cluster started here (a master, two 1-core workers)")
    args = parser.parse_args()
    if args.scaling:
        scaling(args.messages)
        return
    readers = args.readers.split(",")
    batch_sizes = [int(size) for size in args.batch_sizes.split(",")]
    with tempfile.TemporaryDirectory() as data, contextlib.ExitStack() as cluster:
        if args.standalone:
            args.master, _ = cluster.enter_context(standalone_cluster(os.path.join(data, "spark"), workers=2))
        spark = build_session(args.master, "nsqpy-spark-bench")
        try:
            with nsqd_nodes(data, args.nodes) as nodes:
                run_all(spark, args, nodes, readers, batch_sizes, data)
        finally:
            spark.stop()


def run_all(spark, args, nodes, readers, batch_sizes, data: str) -> None:
    """Every run the flags ask for, then their table."""
    if not args.archive_only:
        rate = sink(spark, nodes[0], args.messages)
        print(f"DataFrame -> nsqd: {rate:,.0f} msgs/s", flush=True)
    rows = archive_runs(spark, nodes, args.messages, readers, batch_sizes, data)
    if not args.archive_only:
        fill(nodes[0], "bench_stream", args.messages)
        streaming = stream(spark, nodes[0], "bench_stream", args.messages, os.path.join(data, "bench_stream"))
        print(f"nsqd -> Parquet, streaming, trigger {DEFAULT_TRIGGER}: {streaming:,.0f} msgs/s", flush=True)
    if args.json:
        print(json.dumps({label: {k: result[k] for k in ("end_to_end", "steady")} for label, result in rows}))
        return
    print()
    print(f"| run ({args.messages:,} x {BODY_SIZE} B, {args.nodes} nsqd, {args.master}) | msgs/s end to end | "
          f"msgs/s in batches |")
    print("|---|---:|---:|")
    for label, result in rows:
        print(f"| {label} | {result['end_to_end']:,.0f} | {result['steady']:,.0f} |")
    if not args.archive_only:
        print(f"| nsqd -> Parquet, streaming (trigger {DEFAULT_TRIGGER}, batches of "
              f"{DEFAULT_MAX_MESSAGES_PER_BATCH:,}) | | {streaming:,.0f} |")
        print(f"| DataFrame -> nsqd (write.format(\"nsq\")) | {rate:,.0f} | |")


if __name__ == "__main__":
    main()
