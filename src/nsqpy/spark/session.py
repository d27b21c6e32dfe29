"""A SparkSession with settings that keep one machine's runs light.

The archive command, the tests and the benchmarks build their sessions here:
UI off, few shuffle partitions, driver bound to 127.0.0.1 when the master is
local or on loopback,
and the Python workers running this interpreter (so they find nsqpy and
PyArrow). Every setting can be overridden with ``conf``.
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


def build_session(master: str = "local[*]", app_name: str = "nsqpy", conf: dict | None = None):
    """The session, with the ``nsq`` data source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from . import register

    settings = dict(LIGHT_DEFAULTS)
    if master.startswith("local") or "://127.0.0.1:" in master or "://localhost:" in master:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings.update(LOCAL_DEFAULTS)
    settings.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark
