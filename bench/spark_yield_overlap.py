"""Does Spark write a Python source's rows while the source's ``read`` goes on?

    python bench/spark_yield_overlap.py [--pause 0.2] [--rounds 3] [--master local[1]]

The executors reader (``nsqpy/spark/partitioned.py``) must log and FIN a
partition's messages and wait for nsqd's confirmation before its task ends.
If Spark converted and wrote the rows a ``read`` has yielded while that
``read`` goes on, the reader could yield first and confirm while Spark
writes. This measures whether it does: a partitioned Python streaming
source (15 partitions of 20,000 rows of the archive's columns, made in
memory) archived to Parquet three ways, alternating: no pause; a pause of
``--pause`` seconds in each partition before it yields its rows; the same
pause after it has yielded them. Where Spark overlaps, the pause after
costs less than the pause before; where it does not, it costs as much or
more.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from spark_bench import run_to_end  # noqa: E402
from spark_ceiling import PER_PARTITION, bare_rows  # noqa: E402

from nsqpy.spark.archive import write_archive  # noqa: E402
from nsqpy.spark.session import build_session  # noqa: E402

ROWS = 15 * PER_PARTITION
PER_BATCH = 5 * PER_PARTITION
MODES = ("no pause", "pause before the yield", "pause after the yield")


def pausing_source(pause: float):
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

    from nsqpy.spark.source import source_schema

    class Range(InputPartition):
        def __init__(self, first: int, count: int, mode: str):
            self.first, self.count, self.mode = first, count, mode

    class Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, mode: str):
            self.mode = mode

        def initialOffset(self):
            return {"n": 0}

        def prepareForTriggerAvailableNow(self):
            pass

        def latestOffset(self, start, limit):
            return {"n": min(ROWS, start["n"] + PER_BATCH)}

        def partitions(self, start, end):
            return [Range(first, min(PER_PARTITION, end["n"] - first), self.mode)
                    for first in range(start["n"], end["n"], PER_PARTITION)]

        def read(self, partition):
            rows = bare_rows(partition.first, partition.count)
            if partition.mode == MODES[1]:
                time.sleep(pause)
            yield rows
            if partition.mode == MODES[2]:
                time.sleep(pause)

    class Pausing(DataSource):
        @classmethod
        def name(cls):
            return "pausing"

        def schema(self):
            return source_schema(False)

        def streamReader(self, schema):
            return Reader(self.options["mode"])

    return Pausing


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pause", type=float, default=0.2, help="seconds each partition pauses")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--master", default="local[1]")
    args = parser.parse_args()
    # the workers unpickle the source, which refers to this folder's modules
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                                            os.environ.get("PYTHONPATH")]))
    spark = build_session(args.master, "nsqpy-spark-yield-overlap")
    spark.dataSource.register(pausing_source(args.pause))
    seconds: dict[str, list[float]] = {}
    try:
        with tempfile.TemporaryDirectory() as work:
            for round_number in range(-1, args.rounds):  # one warm-up round
                for mode in MODES:
                    frame = spark.readStream.format("pausing").option("mode", mode).load()
                    folder = os.path.join(work, f"{round_number + 1}-{MODES.index(mode)}")
                    started = time.perf_counter()
                    run_to_end(lambda: write_archive(frame, os.path.join(folder, "out"), os.path.join(folder, "ck"),
                                                     f"overlap {mode}", available_now=True))
                    if round_number >= 0:
                        seconds.setdefault(mode, []).append(time.perf_counter() - started)
    finally:
        spark.stop()
    paused = ROWS // PER_PARTITION * args.pause
    print(f"| {ROWS:,} rows in partitions of {PER_PARTITION:,}, {args.master}, medians of {args.rounds} | seconds | "
          f"over no pause (the pauses add {paused:.1f} s in all) |")
    print("|---|---:|---:|")
    for mode in MODES:
        median = statistics.median(seconds[mode])
        print(f"| {mode} | {median:.2f} | {median - statistics.median(seconds[MODES[0]]):+.2f} |")


if __name__ == "__main__":
    main()
