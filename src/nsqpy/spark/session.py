"""A SparkSession with settings that keep one machine's runs light.

The archive command, the tests and the benchmarks build their sessions here:
UI off, few shuffle partitions, driver bound to 127.0.0.1 when the master is
local or on loopback,
and the Python workers running this interpreter (so they find nsqpy and
PyArrow). Every setting can be overridden with ``conf``.

A master ``sc://host:port`` is a Spark Connect server: the session is a
Connect client (PySpark's ``connect`` extra), the ``nsq`` data source is
registered with the server, and its readers and writers run in the server's
Python workers, so nsqpy must be installed where the server runs. Only the
runtime settings apply there (the server's own are fixed when it starts).
"""

import os
import sys

LIGHT_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
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

    settings = dict(LIGHT_DEFAULTS)
    connect = master.startswith(CONNECT_SCHEME)
    if connect:  # static settings are skipped silently: the server fixed them at its start
        builder = SparkSession.builder.remote(master)
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = SparkSession.builder.master(master)
        if master.startswith("local") or "://127.0.0.1:" in master or "://localhost:" in master:
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            settings.update(LOCAL_DEFAULTS)
    settings.update(conf or {})
    spark = builder.appName(app_name).config(map=settings).getOrCreate()
    if not connect:  # a Connect client has no SparkContext; the server sets its own log level
        spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark
