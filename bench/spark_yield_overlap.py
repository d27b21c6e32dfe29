"""Does Spark write a Python source's rows while the source's ``read`` goes on?

    python bench/spark_yield_overlap.py [--pause 0.2] [--rounds 3] [--master local[1]]

The executors reader (``nsqpy/spark/partitioned.py``) must log and FIN a
partition's messages and wait for nsqd's confirmation before its task ends.
If Spark converted and wrote the rows a ``read`` has yielded while that
``read`` goes on, the reader could yield first and confirm while Spark
writes. This measures whether it does: ``spark_ceiling``'s bare partitioned
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
from spark_ceiling import PER_PARTITION, bare_source  # noqa: E402

from nsqpy.spark.archive import write_archive  # noqa: E402
from nsqpy.spark.session import build_session  # noqa: E402

ROWS = 15 * PER_PARTITION
PER_BATCH = 5 * PER_PARTITION
PAUSES = {"no pause": "", "pause before the yield": "before", "pause after the yield": "after"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pause", type=float, default=0.2, help="seconds each partition pauses")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--master", default="local[1]")
    args = parser.parse_args()
    # the workers unpickle the source, which refers to spark_ceiling in this folder
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                                            os.environ.get("PYTHONPATH")]))
    spark = build_session(args.master, "nsqpy-spark-yield-overlap")
    spark.dataSource.register(bare_source(ROWS, PER_BATCH))
    seconds: dict[str, list[float]] = {}
    try:
        with tempfile.TemporaryDirectory() as work:
            for round_number in range(-1, args.rounds):  # one warm-up round
                for number, (row, pause) in enumerate(PAUSES.items()):
                    frame = (spark.readStream.format("bare").option("shape", "partitioned").option("pause", pause)
                             .option("pause_seconds", str(args.pause)).load())
                    folder = os.path.join(work, f"{round_number + 1}-{number}")
                    started = time.perf_counter()
                    run_to_end(lambda: write_archive(frame, os.path.join(folder, "out"), os.path.join(folder, "ck"),
                                                     f"overlap {row}", available_now=True))
                    if round_number >= 0:
                        seconds.setdefault(row, []).append(time.perf_counter() - started)
    finally:
        spark.stop()
    paused = ROWS // PER_PARTITION * args.pause
    print(f"| {ROWS:,} rows in partitions of {PER_PARTITION:,}, {args.master}, medians of {args.rounds} | seconds | "
          f"over no pause (the pauses add {paused:.1f} s in all) |")
    print("|---|---:|---:|")
    unpaused = statistics.median(seconds["no pause"])
    for row in PAUSES:
        median = statistics.median(seconds[row])
        print(f"| {row} | {median:.2f} | {median - unpaused:+.2f} |")


if __name__ == "__main__":
    main()
