"""The archive job on a real Spark standalone cluster: a master and two
workers started from the pyspark install on 127.0.0.1 (``standalone.py``),
the job submitted to ``spark://127.0.0.1:<port>``, executors in the workers'
own JVMs, with each reader."""

import sys

import pytest

from tests.support.processes import GroupProcess

from .conftest import archived_bodies, channel_stats, publish
from .standalone import standalone_cluster

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``(master URL, workers)``: two 1-core workers; all stopped at the end."""
    with standalone_cluster(str(tmp_path_factory.mktemp("spark-workers")), workers=2, cores=1) as running:
        yield running


@pytest.mark.parametrize("reader", ["driver", "executors"])
def test_archive_job_runs_on_a_standalone_cluster(spark, spark_nsqd, topic, tmp_path, cluster, reader):
    master_url, workers = cluster
    bodies = [f"{topic}-{i:05d}".encode() for i in range(3000)]
    publish(spark_nsqd, topic, bodies)
    out = tmp_path / "out"
    launched = [_executors_launched(worker) for worker in workers]
    job = GroupProcess([sys.executable, "-m", "nsqpy.cli.nsq_to_parquet", f"--topic={topic}",
                        f"--nsqd-tcp-address={spark_nsqd.tcp_address}",
                        f"--nsqd-http-address={spark_nsqd.http_address}", f"--output-dir={out}",
                        f"--master={master_url}", "--available-now", f"--reader={reader}",
                        "--option=max_messages_per_partition=1000", "--conf=spark.executor.memory=512m",
                        "--conf=spark.sql.shuffle.partitions=2"])
    try:
        assert job.wait(180) == 0, job.output[-6000:]
    finally:
        job.kill()
    assert "nsq_to_parquet: stopped" in job.output
    assert sorted(archived_bodies(spark, out)) == bodies
    stats = channel_stats(spark_nsqd, topic, "nsq_to_parquet")
    assert (stats["depth"], stats["in_flight_count"]) == (0, 0)
    # the job's tasks ran in executors both workers launched for it
    assert [_executors_launched(worker) for worker in workers] == [count + 1 for count in launched]
    if reader == "executors":  # its partitions' log, under the checkpoint, is gone once committed
        assert not list((out / "_checkpoint" / "nsq-wal").glob("batch-*"))


def _executors_launched(worker) -> int:
    return sum("Asked to launch executor app-" in line for line in worker.lines)
