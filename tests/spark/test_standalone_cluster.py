"""The archive job on a real Spark standalone cluster: a master and two
workers started from the pyspark install on 127.0.0.1 (``standalone.py``),
the job submitted to ``spark://127.0.0.1:<port>``, executors in the workers'
own JVMs, with each reader."""

import sys

import pytest

from tests.support.processes import GroupProcess
from tests.support.wire import http

from .conftest import TASK_FAULTS_DIR, channel_stats, committed_bodies, publish
from .standalone import standalone_cluster

# several JVM starts (or a standalone cluster) per test: minutes on a busy 2-core machine;
# one worker runs them all, so the module's cluster starts once
pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``(master URL, workers)``: two 1-core workers; all stopped at the end."""
    with standalone_cluster(str(tmp_path_factory.mktemp("spark-workers")), workers=2, cores=1) as running:
        yield running


@pytest.mark.parametrize("reader", ["driver", "executors", "log"])
def test_archive_job_runs_on_a_standalone_cluster(spark_nsqd, topic, tmp_path, cluster, reader):
    master_url, workers = cluster
    bodies = [f"{topic}-{i:05d}".encode() for i in range(3000)]
    if reader == "log":  # a retained topic: read by offset in the executors, no channel
        assert http("POST", f"{spark_nsqd.http_url}/topic/create?topic={topic}")[0] == 200
        assert http("POST", f"{spark_nsqd.http_url}/topic/config?topic={topic}&retention=1h")[0] == 200
    publish(spark_nsqd, topic, bodies)
    out = tmp_path / "out"
    launched = [_executors_launched(worker) for worker in workers]
    job = _archive_available_now(spark_nsqd, topic, out, master_url, f"--reader={reader}")
    assert "nsq_to_parquet: stopped" in job.output
    assert sorted(committed_bodies(out)) == bodies
    if reader == "log":
        assert "with the log reader" in job.output
    else:
        stats = channel_stats(spark_nsqd, topic, "nsq_to_parquet")
        assert (stats["depth"], stats["in_flight_count"]) == (0, 0)
    # the job's tasks ran in executors both workers launched for it
    assert [_executors_launched(worker) for worker in workers] == [count + 1 for count in launched]
    if reader == "executors":  # its partitions' log, under the checkpoint, is gone once committed
        assert not list((out / "_checkpoint" / "nsq-wal").glob("batch-*"))


def _archive_available_now(nsqd, topic: str, out, master_url: str, *extra: str) -> GroupProcess:
    """``nsq_to_parquet --available-now`` on the cluster, run to its end (it must succeed)."""
    job = GroupProcess([sys.executable, "-m", "nsqpy.cli.nsq_to_parquet", f"--topic={topic}",
                        f"--nsqd-tcp-address={nsqd.tcp_address}", f"--nsqd-http-address={nsqd.http_address}",
                        f"--output-dir={out}", f"--master={master_url}", "--available-now",
                        "--option=max_messages_per_partition=1000", "--conf=spark.executor.memory=512m",
                        "--conf=spark.sql.shuffle.partitions=2", *extra])
    try:
        assert job.wait(240) == 0, job.output[-6000:]
    finally:
        job.kill()
    return job


def _executors_launched(worker) -> int:
    return sum("Asked to launch executor app-" in line for line in worker.lines)


def test_an_executor_killed_after_its_partition_log_write_loses_and_repeats_nothing(
        spark_nsqd, topic, tmp_path, cluster):
    """SIGKILL of the executor JVM (and its Python workers) running an odd
    partition, right after the partition's log write (``task_faults/``; even
    partitions raise instead). The master launches a new executor, Spark
    retries the tasks, the retries replay the log, and the messages nsqd
    requeued when the executor's connections died are dropped when they come
    again (a second run reads them)."""
    master_url, workers = cluster
    bodies = [f"{topic}-{i:05d}".encode() for i in range(2000)]
    publish(spark_nsqd, topic, bodies)
    out, faults = tmp_path / "out", tmp_path / "faults"
    faults.mkdir()
    launched = sum(_executors_launched(worker) for worker in workers)
    for run in range(2):  # the second run finds the redeliveries of what the failed attempts held
        job = _archive_available_now(spark_nsqd, topic, out, master_url, "--reader=executors",
                                     f"--conf=spark.executorEnv.PYTHONPATH={TASK_FAULTS_DIR}",
                                     f"--conf=spark.executorEnv.NSQPY_TEST_TASK_FAULTS={faults}",
                                     "--conf=spark.executorEnv.NSQPY_TEST_TASK_FAULTS_KILL=executor")
        if run == 0:
            assert {"batch-1-part-0", "batch-1-part-1"} <= {path.name for path in faults.iterdir()}
            assert "ExecutorLostFailure" in job.output or "Lost executor" in job.output, job.output[-6000:]
        assert sorted(committed_bodies(out)) == bodies
    stats = channel_stats(spark_nsqd, topic, "nsq_to_parquet")
    assert (stats["depth"], stats["in_flight_count"]) == (0, 0)
    # more executors than the two runs' first ones: the killed one was replaced
    assert sum(_executors_launched(worker) for worker in workers) > launched + 2
