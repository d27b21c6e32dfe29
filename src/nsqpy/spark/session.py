"""A SparkSession with settings that keep one machine's runs light.

The archive command, the tests and the benchmarks build their sessions here:
UI off, few shuffle partitions, checkpoint files renamed without a process
per rename, driver bound to 127.0.0.1 when the master is local or on loopback,
the Python workers running this interpreter (so they find nsqpy and
PyArrow), and the driver's JVM mapping its classes from an archive
(``classcache``). Every setting can be overridden with ``conf``.

A master ``sc://host:port`` is a Spark Connect server: the session is a
Connect client (PySpark's ``connect`` extra), the ``nsq`` data source is
registered with the server, and its readers and writers run in the server's
Python workers, so nsqpy must be installed where the server runs. Only the
runtime settings apply there (the server fixed the others when it started,
and a static one in ``conf`` is refused with a warning).
"""

import os
import subprocess
import sys

# Spark's default checkpoint manager renames through Hadoop's FileContext,
# which on a local disk runs a ``readlink`` process for each rename (Hadoop
# without its native library): several per micro-batch, 40-70 ms of every
# batch's offset and commit log writes. The FileSystem one renames in-process
# (atomically on local disks and HDFS, as the other).
CHECKPOINT_FILE_MANAGER = ("org.apache.spark.sql.execution.streaming.checkpointing."
                           "FileSystemBasedCheckpointFileManager")
SQL_DEFAULTS = {  # runtime settings: a Connect client sets them too
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILE_MANAGER,
}
LIGHT_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    **SQL_DEFAULTS,
}
LOCAL_DEFAULTS = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}
CONNECT_SCHEME = "sc://"


def build_session(master: str = "local[*]", app_name: str = "nsqpy", conf: dict | None = None):
    """The session, with the ``nsq`` data source registered."""
    from pyspark.sql import SparkSession

    from . import register
    from .classcache import driver_java_options

    connect = master.startswith(CONNECT_SCHEME)
    settings = dict(SQL_DEFAULTS if connect else LIGHT_DEFAULTS)
    if connect:
        builder = SparkSession.builder.remote(master)
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = SparkSession.builder.master(master)
        if master.startswith("local") or "://127.0.0.1:" in master or "://localhost:" in master:
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            settings.update(LOCAL_DEFAULTS)
        if "spark.driver.extraJavaOptions" not in (conf or {}):
            java_options = driver_java_options()
            if java_options:
                settings["spark.driver.extraJavaOptions"] = java_options
    settings.update(conf or {})
    spark = builder.appName(app_name).config(map=settings).getOrCreate()
    if not connect:  # a Connect client has no SparkContext; the server sets its own log level
        spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark


def end_session(spark, timeout: float = 10.0) -> None:
    """Stop the session and the JVM this process started for it, for a
    command about to exit: the JVM otherwise lives until the interpreter
    exits, holding standard error (and the command's filter of it) open.
    Closing its standard input is how PySpark's gateway JVM is told to exit;
    its shutdown hooks still run."""
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if process is None or process.stdin is None:
        return  # a Connect client, or a JVM this process did not start
    SparkContext._gateway = SparkContext._jvm = None
    process.stdin.close()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
