"""Test-only fault injection into Spark's Python workers: every partition of
the executors reader fails once, right after its partition log is written
(its messages received and logged, none FINished).

Python imports ``sitecustomize`` at start-up from the first folder on its
path that has one, and Spark hands its workers the PYTHONPATH it was started
with; so a test that starts ``nsq_to_parquet`` with this folder first on
PYTHONPATH and ``NSQPY_TEST_TASK_FAULTS=<directory>`` gets the faults, and
nothing else does. The first attempt of an even partition raises; that of
an odd one SIGKILLs its own Python worker, as the OOM killer would, or with
``NSQPY_TEST_TASK_FAULTS_KILL=executor`` the executor JVM above it (the
worker's parent is PySpark's daemon, whose parent is the executor). A marker
file per partition in the directory keeps Spark's retry from failing too.
"""

import os

FAULTS = os.environ.get("NSQPY_TEST_TASK_FAULTS")

if FAULTS:
    import signal

    from nsqpy.spark.wal import PartitionLog

    logged = PartitionLog.write

    def write_then_fail_once(self, batch, index, rows):
        logged(self, batch, index, rows)
        marker = os.path.join(FAULTS, f"batch-{batch}-part-{index}")
        if os.path.exists(marker):
            return
        with open(marker, "w") as note:
            note.write(f"{rows.num_rows}\n")
        if index % 2:
            if os.environ.get("NSQPY_TEST_TASK_FAULTS_KILL") == "executor":
                os.kill(_parent_of(os.getppid()), signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError(f"injected failure of batch {batch} partition {index} after its log write")

    def _parent_of(pid: int) -> int:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])

    PartitionLog.write = write_then_fail_once


# The log reader's faults: ``NSQPY_TEST_LOG_FAULTS=<directory>`` SIGKILLs a
# task's Python worker once per partition, after its first record batch went
# to Spark (mid-partition); ``NSQPY_TEST_LOG_SLOW=<seconds>`` sleeps after
# every record batch, so that a batch is long enough to kill nsqd under it.
LOG_FAULTS = os.environ.get("NSQPY_TEST_LOG_FAULTS")
LOG_SLOW = float(os.environ.get("NSQPY_TEST_LOG_SLOW", "0"))

if LOG_FAULTS or LOG_SLOW:
    import signal
    import time

    from nsqpy.spark.logread import RangeReader

    read_range = RangeReader.batches

    def batches_with_faults(self, start, end):
        for number, batch in enumerate(read_range(self, start, end)):
            yield batch
            if LOG_SLOW:
                time.sleep(LOG_SLOW)
            marker = os.path.join(LOG_FAULTS or "", f"log-{self.node.replace(':', '_')}-{start}-{end}")
            if LOG_FAULTS and number == 0 and not os.path.exists(marker):
                with open(marker, "w") as note:
                    note.write(f"{batch.num_rows}\n")
                os.kill(os.getpid(), signal.SIGKILL)

    RangeReader.batches = batches_with_faults
