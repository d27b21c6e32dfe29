"""A Spark standalone cluster from the pyspark install, on 127.0.0.1: one
master and a few workers, for the tests and for ``bench/spark_bench.py
--standalone``. Every daemon listens on a port the system picks and is
stopped when the ``with`` block ends, however it ends."""

import contextlib
import os
import sys

import pyspark

from tests.support.processes import GroupProcess

SPARK_HOME = os.path.dirname(pyspark.__file__)


def spark_env() -> dict:
    """The environment of a Spark program started from the pyspark install:
    on loopback, its Python workers running this interpreter."""
    return {"SPARK_HOME": SPARK_HOME, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}


def spark_daemon(main_class: str, *args: str) -> GroupProcess:
    """``spark-class <main class> ...`` on loopback."""
    return GroupProcess([os.path.join(SPARK_HOME, "bin", "spark-class"), main_class, *args],
                        env={**spark_env(), "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"})  # else 6066


@contextlib.contextmanager
def standalone_cluster(work_dir: str, workers: int = 2, cores: int = 1, memory: str = "1g"):
    """``(master URL, worker processes)``; each worker offers ``cores`` and
    ``memory`` to applications and keeps its executors' files under ``work_dir``."""
    daemons: list[GroupProcess] = []
    try:
        master = spark_daemon("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0",
                              "--webui-port", "0")
        daemons.append(master)
        url = master.wait_for(r"Starting Spark master at (spark://\S+)", timeout=60).group(1)
        for number in range(workers):
            daemons.append(spark_daemon("org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                        "--port", "0", "--webui-port", "0", "--cores", str(cores),
                                        "--memory", memory, "--work-dir", os.path.join(work_dir, f"worker{number}")))
        for worker in daemons[1:]:
            worker.wait_for(r"Successfully registered with master", timeout=60)
        yield url, daemons[1:]
    finally:
        for daemon in reversed(daemons):
            daemon.stop()
