"""The nsq source against Spark's own ceiling on this machine, in one run.

    python bench/spark_ceiling.py [--messages 500000] [--rounds 2] [--master local[2]]
                                  [--nodes 1,2] [--no-cli] [--pin-nsqd]

Every row archives ``--messages`` rows of the nsq source's six columns
(200-byte bodies) to Parquet by date and hour, and the rows take turns,
round after round, so a busy moment hits them all alike:

* bare source, simple: a PySpark Python streaming source of the simple
  kind (``SimpleDataSourceStreamReader``, as ``reader=driver``) whose
  ``read`` hands over batches of ``--batch`` rows made in memory, as Arrow
  record batches: no NSQ, nothing but Spark's path for a Python source;
* nsq source, ``reader=driver``, from nsqd (``--nodes`` nsqd);
* bare source, partitioned: a ``DataSourceStreamReader`` planning
  partitions of 20,000 rows each (as ``reader=executors``), each task
  making its rows as one Arrow record batch;
* nsq source, ``reader=executors``, from nsqd;
* bare source, log's shape: the partitioned one with the log reader's
  seventh column, ``offset`` (int64), as ``reader=log`` hands over;
* nsq source, ``reader=log``: the same backlog in a retained topic, read by
  offset (partitions of 20,000, batches of ``--batch``), against the bare
  source of its shape;
* the JVM write: the same columns made by Spark itself (``spark.range``)
  written with one batch write: what Spark does without Python;
* ``nsq_to_parquet --available-now`` from exec to exit (``--no-cli`` leaves
  it out), against the in-batch time of the ``reader=driver`` row.

The streaming rows run the archive's own query (``write_archive``) with
``availableNow``; each gives msgs/s end to end (query start to its end) and
in batches (rows over the batches' own durations). The nsq rows' backlog is
published before their query starts and is not timed, and every row starts
once nsqd is at rest.

A second table says where each row's CPU went over the timed span: Spark's
JVM, the Python source runner (the driver-side process of a Python
streaming source, which runs the simple reader's ``read``), the Python
workers (the tasks: the partitioned readers), nsqd, and the CLI's own
Python; and how many of the machine's cores the row kept busy on average.
A row that keeps them all busy cannot go faster without spending less CPU.

``--pin-nsqd`` runs nsqd on the last CPU and everything else (this process,
Spark, the CLI) on the others, as where nsqd runs on hosts of its own; the
master becomes ``local[<the others>]`` unless ``--master`` is given.
"""

import argparse
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cpu_meter import CPUMeter  # noqa: E402
from spark_bench import BODY_SIZE, archive, fill, fill_evenly, nsqd_nodes, run_to_end  # noqa: E402

from nsqpy.spark.archive import with_date_and_hour, write_archive  # noqa: E402
from nsqpy.spark.backlog import channel_lag  # noqa: E402
from nsqpy.spark.session import build_session  # noqa: E402

PER_PARTITION = 20_000
TOPIC = "ceiling"
NSQD_ADDRESS = "127.0.0.1:4150"
PROCESS_KINDS = [("JVM", "/bin/java"), ("nsqd", "nsqpy.cli.nsqd"), ("source runner", "python_streaming_source_runner"),
                 ("workers", "pyspark.daemon"), ("workers", "pyspark.worker"), ("CLI", "nsq_to_parquet")]
CPU_COLUMNS = ["JVM", "source runner", "workers", "nsqd", "CLI"]


def bare_rows(start: int, count: int, offsets: bool = False):
    """``count`` rows of the source's columns as one Arrow record batch, ids
    numbered from ``start`` (and, with ``offsets``, the log reader's
    ``offset`` column); made in memory, as a source with no I/O would."""
    import datetime

    import pyarrow as pa

    now = datetime.datetime.now(datetime.timezone.utc)
    columns = {
        "id": pa.array([f"{n:016x}" for n in range(start, start + count)], pa.string()),
        "body": pa.array([b"x" * BODY_SIZE] * count, pa.binary()),
        "timestamp": pa.array([now] * count, pa.timestamp("us", tz="UTC")),
        "attempts": pa.array([1] * count, pa.int32()),
        "topic": pa.array([TOPIC] * count, pa.string()),
        "nsqd_address": pa.array([NSQD_ADDRESS] * count, pa.string()),
    }
    if offsets:
        columns["offset"] = pa.array(range(start, start + count), pa.int64())
    return pa.RecordBatch.from_arrays(list(columns.values()), names=list(columns))


def bare_source(total: int, per_batch: int):
    """The reference sources, as PySpark data source classes: ``shape``
    ``simple``, ``partitioned`` or ``log`` (partitioned, with ``offset``).
    The partitioned ones' ``pause`` option (``before`` or ``after``) makes each
    partition wait ``pause_seconds`` before or after it yields its rows
    (``bench/spark_yield_overlap.py``)."""
    from pyspark.sql.datasource import (DataSource, DataSourceStreamReader, InputPartition,
                                        SimpleDataSourceStreamReader)
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

    from nsqpy.spark.logread import log_schema
    from nsqpy.spark.source import source_schema

    class Simple(SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):
        def initialOffset(self):
            return {"n": 0}

        def prepareForTriggerAvailableNow(self):
            pass

        def read(self, start):
            first = start["n"]
            count = min(per_batch, total - first)
            if count <= 0:
                return iter([]), start
            return iter([bare_rows(first, count)]), {"n": first + count}

        def readBetweenOffsets(self, start, end):
            return iter([bare_rows(start["n"], end["n"] - start["n"])])

    class Range(InputPartition):
        def __init__(self, first: int, count: int):
            self.first, self.count = first, count

    class Partitioned(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, pause: str, seconds: float, offsets: bool):
            self.pause, self.seconds, self.offsets = pause, seconds, offsets

        def initialOffset(self):
            return {"n": 0}

        def prepareForTriggerAvailableNow(self):
            pass

        def latestOffset(self, start, limit):
            return {"n": min(total, start["n"] + per_batch)}

        def partitions(self, start, end):
            return [Range(first, min(PER_PARTITION, end["n"] - first))
                    for first in range(start["n"], end["n"], PER_PARTITION)]

        def read(self, partition):
            rows = bare_rows(partition.first, partition.count, self.offsets)
            if self.pause == "before":
                time.sleep(self.seconds)
            yield rows
            if self.pause == "after":
                time.sleep(self.seconds)

    class Bare(DataSource):
        @classmethod
        def name(cls):
            return "bare"

        def schema(self):
            return log_schema(False) if self.options.get("shape") == "log" else source_schema(False)

        def simpleStreamReader(self, schema):
            return Simple()

        def streamReader(self, schema):
            shape = self.options.get("shape")
            if shape not in ("partitioned", "log"):
                from pyspark.errors import PySparkNotImplementedError
                raise PySparkNotImplementedError(errorClass="NOT_IMPLEMENTED",
                                                 messageParameters={"feature": "streamReader"})
            return Partitioned(self.options.get("pause", ""), float(self.options.get("pause_seconds", "0")),
                               shape == "log")

    return Bare


def nsqd_at_rest(meter: CPUMeter, timeout: float = 60.0) -> None:
    """Until nsqd spends under 4% of a core: what an earlier row or the
    backlog's publishing left it to do (the executors reader's last FINs
    kept it busy for 0.9 CPU seconds into the next row) is neither charged
    to the row timed next nor competing with it."""
    deadline = time.monotonic() + timeout
    before = meter.reading()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        after = meter.reading()
        if meter.spent(before, after).get("nsqd", 0.0) < 0.02:
            return
        before = after


def with_cpu(meter: CPUMeter, run) -> dict:
    """``run()``'s result, with the CPU seconds each kind of process spent
    meanwhile and the seconds that took, once nsqd is at rest."""
    nsqd_at_rest(meter)
    before, started = meter.reading(), time.perf_counter()
    result = run()
    result["cpu"] = meter.spent(before, meter.reading())
    result["cpu_span"] = time.perf_counter() - started
    return result


def run_bare(spark, shape: str, workdir: str) -> dict:
    frame = spark.readStream.format("bare").option("shape", shape).load()
    return run_to_end(lambda: write_archive(frame, os.path.join(workdir, "out"), os.path.join(workdir, "ck"),
                                             f"bare {shape}", available_now=True))


def answered(nodes, topic: str, result: dict, timeout: float = 60.0) -> dict:
    """``result``, once nsqd has applied every FIN for ``topic``'s channel:
    the driver reader sends its last batch's at the commit, as the query
    ends, and their CPU belongs to the row that sent them."""
    addresses = [nsqd.http_address for nsqd in nodes]
    deadline = time.monotonic() + timeout
    while channel_lag(addresses, topic, "archive") != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    return result


def run_jvm(spark, messages: int, workdir: str) -> dict:
    from pyspark.sql import functions as F

    frame = spark.range(messages).select(
        F.lpad(F.hex("id"), 16, "0").alias("id"),
        F.expr(f"cast(repeat('x', {BODY_SIZE}) as binary)").alias("body"),
        F.current_timestamp().alias("timestamp"),
        F.lit(1).cast("int").alias("attempts"),
        F.lit(TOPIC).alias("topic"),
        F.lit(NSQD_ADDRESS).alias("nsqd_address"))
    started = time.perf_counter()
    with_date_and_hour(frame).write.partitionBy("date", "hour").parquet(os.path.join(workdir, "out"))
    elapsed = time.perf_counter() - started
    return {"rows": messages, "end_to_end": messages / elapsed, "steady": 0.0, "busy": elapsed}


def run_cli(nsqd, messages: int, per_batch: int, master: str, workdir: str, topic: str) -> dict:
    command = [str(Path(sys.executable).parent / "nsq_to_parquet"), f"--topic={topic}", "--channel=archive",
               f"--nsqd-tcp-address={nsqd.tcp_address}", f"--nsqd-http-address={nsqd.http_address}",
               f"--output-dir={os.path.join(workdir, 'out')}", f"--master={master}", "--available-now",
               f"--max-messages-per-batch={per_batch}"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"nsq_to_parquet exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return {"rows": messages, "end_to_end": messages / elapsed, "steady": 0.0, "busy": elapsed}


def benchmark_rows(spark, nodes, node_counts: list[int], meter: CPUMeter, args) -> dict:
    """Each row's run, given its work folder: a backlog published first
    (untimed), then the timed span with its CPU."""
    def nsq(reader: str, count: int):
        def run(work: str) -> dict:
            topic = os.path.basename(work)
            fill_evenly(nodes[:count], topic, args.messages, retained=reader == "log")
            if reader == "log":  # nothing to acknowledge: the run ends with its query
                return with_cpu(meter, lambda: archive(spark, nodes[:count], topic, args.batch, reader, work))
            return with_cpu(meter, lambda: answered(nodes[:count], topic,
                                                    archive(spark, nodes[:count], topic, args.batch, reader, work)))
        return run

    def cli(work: str) -> dict:
        topic = os.path.basename(work)
        fill(nodes[0], topic, args.messages)
        return with_cpu(meter, lambda: answered(nodes[:1], topic, run_cli(nodes[0], args.messages, args.batch,
                                                                          args.master, work, topic)))

    rows = {"bare simple": lambda work: with_cpu(meter, lambda: run_bare(spark, "simple", work))}
    rows.update({f"nsq driver, {count} nsqd": nsq("driver", count) for count in node_counts})
    rows["bare partitioned"] = lambda work: with_cpu(meter, lambda: run_bare(spark, "partitioned", work))
    rows.update({f"nsq executors, {count} nsqd": nsq("executors", count) for count in node_counts})
    rows["bare log"] = lambda work: with_cpu(meter, lambda: run_bare(spark, "log", work))
    rows.update({f"nsq log, {count} nsqd": nsq("log", count) for count in node_counts})
    rows["JVM write"] = lambda work: with_cpu(meter, lambda: run_jvm(spark, args.messages, work))
    if not args.no_cli:
        rows["nsq_to_parquet CLI"] = cli
    return rows


def pin_apart(nodes) -> None:
    """This process (and what it starts from now on) on every CPU but the
    last, and each nsqd, all its threads, on the last."""
    *others, last = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, others)
    for nsqd in nodes:
        for thread in os.listdir(f"/proc/{nsqd.process.pid}/task"):
            os.sched_setaffinity(int(thread), {last})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--batch", type=int, default=100_000, help="messages per micro-batch")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1, help="rounds run first and not counted (the JVM's "
                                                               "code and Spark's Python workers warm up)")
    parser.add_argument("--master", help="Spark master (default local[2], or local[<CPUs but one>] with --pin-nsqd)")
    parser.add_argument("--nodes", default="1", help="comma-separated nsqd counts for the nsq rows, e.g. 1,2")
    parser.add_argument("--only", default="", help="a regular expression: only the rows whose name it finds")
    parser.add_argument("--no-cli", action="store_true", help="leave out nsq_to_parquet end to end")
    parser.add_argument("--pin-nsqd", action="store_true", help="nsqd on the last CPU, everything else on the others")
    args = parser.parse_args()
    if args.pin_nsqd and len(os.sched_getaffinity(0)) < 2:
        parser.error("--pin-nsqd needs two CPUs or more")
    args.master = args.master or (f"local[{len(os.sched_getaffinity(0)) - 1}]" if args.pin_nsqd else "local[2]")
    node_counts = [int(n) for n in args.nodes.split(",")]
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as data, contextlib.ExitStack() as stack:
        nodes = stack.enter_context(nsqd_nodes(data, max(node_counts)))
        if args.pin_nsqd:
            pin_apart(nodes)
        meter = stack.enter_context(CPUMeter(PROCESS_KINDS))
        spark = build_session(args.master, "nsqpy-spark-ceiling")
        stack.callback(spark.stop)
        spark.dataSource.register(bare_source(args.messages, args.batch))
        rows = benchmark_rows(spark, nodes, node_counts, meter, args)
        if args.only:
            rows = {key: run for key, run in rows.items() if re.search(args.only, key)}
        for round_number in range(-args.warmup, args.rounds):
            for key, run in rows.items():
                result = run(os.path.join(data, f"r{round_number + args.warmup}-"
                                                f"{key.replace(' ', '_').replace(',', '')}"))
                label = "warm-up" if round_number < 0 else f"round {round_number + 1}"
                print(f"{label}: {key}: {result['end_to_end']:,.0f} msgs/s end to end, "
                      f"{result['steady']:,.0f} in batches ({result['rows']:,} rows"
                      + "".join(f"; {phase} {ms:.0f} ms" for phase, ms in result.get("phases", {}).items())
                      + ")", flush=True)
                if round_number >= 0:
                    results.setdefault(key, []).append(result)
    report(results, args)


def report(results: dict[str, list[dict]], args) -> None:
    def median(key: str, field: str) -> float:
        return statistics.median(r[field] for r in results[key])

    def ratio(key: str, reference: str, field: str) -> str:
        if reference not in results:
            return ""
        return " / ".join(f"{mine[field] / ref[field]:.2f}" for mine, ref in zip(results[key], results[reference]))

    print()
    print(f"| {args.messages:,} x {BODY_SIZE} B, {args.master}, medians of {args.rounds} | msgs/s end to end | "
          f"msgs/s in batches | per round: / bare source (in batches) | / JVM write (end to end) |")
    print("|---|---:|---:|---:|---:|")
    for key in results:
        reference = ("bare simple" if "driver" in key else "bare partitioned" if "executors" in key else
                     "bare log" if key.startswith("nsq log") else None)
        print(f"| {key} | {median(key, 'end_to_end'):,.0f} | "
              f"{median(key, 'steady'):,.0f} | "
              f"{ratio(key, reference, 'steady') if reference else ''} | "
              f"{ratio(key, 'JVM write', 'end_to_end')} |")
    driver = next((key for key in results if key.startswith("nsq driver")), None)
    if "nsq_to_parquet CLI" in results and driver:
        spans = " / ".join(f"{cli['busy'] / batch['busy']:.2f}"
                           for cli, batch in zip(results["nsq_to_parquet CLI"], results[driver]))
        print(f"\nnsq_to_parquet from exec to exit over {driver}'s time in batches, per round: {spans}")
    print()
    print(f"| CPU seconds over the timed span, medians of {args.rounds} | " + " | ".join(CPU_COLUMNS)
          + f" | all | cores busy (of {os.cpu_count()}) |")
    print("|---|" + "---:|" * (len(CPU_COLUMNS) + 2))
    for key, runs in results.items():
        spent = [statistics.median(r["cpu"].get(kind, 0.0) for r in runs) for kind in CPU_COLUMNS]
        busy = statistics.median(sum(r["cpu"].values()) / r["cpu_span"] for r in runs)
        print(f"| {key} | " + " | ".join(f"{seconds:.2f}" for seconds in spent)
              + f" | {statistics.median(sum(r['cpu'].values()) for r in runs):.2f} | {busy:.2f} |")


if __name__ == "__main__":
    main()
