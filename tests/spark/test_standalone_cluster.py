"""The archive job on a real Spark standalone cluster: a master and a worker
started from the pyspark install on 127.0.0.1, the job submitted to
``spark://127.0.0.1:<port>``, executors in the worker's own JVM."""

import os
import sys

import pyspark
import pytest

from tests.support.processes import GroupProcess

from .conftest import archived_bodies, channel_stats, publish

pytestmark = pytest.mark.spark

SPARK_HOME = os.path.dirname(pyspark.__file__)


def spark_env() -> dict:
    """The environment of a Spark program started from the pyspark install:
    on loopback, its Python workers running this interpreter."""
    return {"SPARK_HOME": SPARK_HOME, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}


def spark_daemon(main_class: str, *args: str) -> GroupProcess:
    """``spark-class <main class> ...`` on loopback."""
    return GroupProcess([os.path.join(SPARK_HOME, "bin", "spark-class"), main_class, *args],
                        env={**spark_env(), "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"})  # else 6066


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    """A master with one 2-core worker (``(master URL, worker)``); both stopped at the end."""
    daemons = []
    try:
        master = spark_daemon("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0",
                              "--webui-port", "0")
        daemons.append(master)
        url = master.wait_for(r"Starting Spark master at (spark://\S+)", timeout=60).group(1)
        worker = spark_daemon("org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--port", "0",
                              "--webui-port", "0", "--cores", "2", "--memory", "1g",
                              "--work-dir", str(tmp_path_factory.mktemp("spark-worker")))
        daemons.append(worker)
        worker.wait_for(r"Successfully registered with master", timeout=60)
        yield url, worker
    finally:
        for daemon in reversed(daemons):
            daemon.stop()


def test_archive_job_runs_on_a_standalone_cluster(spark, spark_nsqd, topic, tmp_path, standalone_cluster):
    master_url, worker = standalone_cluster
    bodies = [f"{topic}-{i:05d}".encode() for i in range(3000)]
    publish(spark_nsqd, topic, bodies)
    out = tmp_path / "out"
    job = GroupProcess([sys.executable, "-m", "nsqpy.cli.nsq_to_parquet", f"--topic={topic}",
                        f"--nsqd-tcp-address={spark_nsqd.tcp_address}",
                        f"--nsqd-http-address={spark_nsqd.http_address}", f"--output-dir={out}",
                        f"--master={master_url}", "--available-now", "--conf=spark.executor.memory=512m",
                        "--conf=spark.sql.shuffle.partitions=2"])
    try:
        assert job.wait(180) == 0, job.output[-6000:]
    finally:
        job.kill()
    assert "nsq_to_parquet: stopped" in job.output
    assert sorted(archived_bodies(spark, out)) == bodies
    assert channel_stats(spark_nsqd, topic, "nsq_to_parquet")["depth"] == 0
    # the Parquet files were written by an executor the worker launched for the job
    worker.wait_for(r"Asked to launch executor app-")
