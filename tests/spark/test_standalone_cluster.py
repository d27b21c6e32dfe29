"""The archive job on a real Spark standalone cluster: a master and a worker
started from the pyspark install on 127.0.0.1, the job submitted to
``spark://127.0.0.1:<port>``, executors in the worker's own JVM."""

import os
import re
import subprocess
import sys
import threading
import time

import pyspark
import pytest

from .conftest import archived_bodies, channel_stats, publish

pytestmark = pytest.mark.spark

SPARK_HOME = os.path.dirname(pyspark.__file__)


class SparkDaemon:
    """``spark-class <main class> ...`` in its own process group, its log kept."""

    def __init__(self, main_class: str, *args: str):
        env = {**os.environ, "SPARK_HOME": SPARK_HOME, "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": sys.executable,
               "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}  # else it takes port 6066
        self.lines: list[str] = []
        self.process = subprocess.Popen([os.path.join(SPARK_HOME, "bin", "spark-class"), main_class, *args],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                        start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)

    def wait_for(self, pattern: str, timeout: float = 60.0) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                found = re.search(pattern, line)
                if found:
                    return found
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"no {pattern!r} from spark-class:\n" + "".join(self.lines[-40:]))

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(5)


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    """A master with one 2-core worker (``(master URL, worker)``); both stopped at the end."""
    daemons = []
    try:
        master = SparkDaemon("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0",
                             "--webui-port", "0")
        daemons.append(master)
        url = master.wait_for(r"Starting Spark master at (spark://\S+)").group(1)
        worker = SparkDaemon("org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--port", "0",
                             "--webui-port", "0", "--cores", "2", "--memory", "1g",
                             "--work-dir", str(tmp_path_factory.mktemp("spark-worker")))
        daemons.append(worker)
        worker.wait_for(r"Successfully registered with master")
        yield url, worker
    finally:
        for daemon in reversed(daemons):
            daemon.stop()


def test_archive_job_runs_on_a_standalone_cluster(spark, spark_nsqd, topic, tmp_path, standalone_cluster):
    master_url, worker = standalone_cluster
    bodies = [f"{topic}-{i:05d}".encode() for i in range(3000)]
    publish(spark_nsqd, topic, bodies)
    out = tmp_path / "out"
    job = subprocess.run(
        [sys.executable, "-m", "nsqpy.cli.nsq_to_parquet", f"--topic={topic}",
         f"--nsqd-tcp-address={spark_nsqd.tcp_address}", f"--nsqd-http-address={spark_nsqd.http_address}",
         f"--output-dir={out}", f"--master={master_url}", "--available-now",
         "--conf=spark.executor.memory=512m", "--conf=spark.sql.shuffle.partitions=2"],
        capture_output=True, text=True, timeout=180, start_new_session=True)
    assert job.returncode == 0, job.stdout + job.stderr[-4000:]
    assert "nsq_to_parquet: stopped" in job.stdout
    assert sorted(archived_bodies(spark, out)) == bodies
    assert channel_stats(spark_nsqd, topic, "nsq_to_parquet")["depth"] == 0
    # the Parquet files were written by an executor the worker launched for the job
    worker.wait_for(r"Asked to launch executor app-")
