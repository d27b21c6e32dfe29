"""NSQ and Apache Spark: topics as streaming DataFrames, DataFrames to topics.

    import nsqpy.spark
    nsqpy.spark.register(spark)
    df = (spark.readStream.format("nsq").option("topic", "events")
          .option("channel", "archive").option("lookupd_http_addresses", "127.0.0.1:4161").load())

From a Spark Connect client (``SparkSession.builder.remote("sc://host:15002")``,
or ``build_session("sc://...")``) the same ``register`` sends the source to
the server, whose Python workers run it: nsqpy must be installed there, and
option mistakes show when the plan is analysed (``.schema``, ``start()``).

Needs the ``spark`` extra (``pip install 'nsqpy[spark]'``): PySpark 4.2 or
newer, whose Python data source API has admission control and
``Trigger.AvailableNow``, and PyArrow.
"""

INSTALL_HINT = "pip install 'nsqpy[spark]' (in a checkout: .venv/bin/pip install -e '.[spark]')"

try:
    import pyarrow  # noqa: F401 - the source's batches are Arrow record batches
    import pyspark
except ImportError as missing:
    raise ImportError(f"nsqpy.spark needs PySpark and PyArrow ({missing.name} is not installed): "
                      f"{INSTALL_HINT}", name=missing.name) from None

_MAJOR, _MINOR = (int(part) for part in pyspark.__version__.split(".")[:2])
if (_MAJOR, _MINOR) < (4, 2):
    # earlier versions run a single batch under availableNow and never commit it
    raise ImportError(f"nsqpy.spark needs PySpark 4.2 or newer (found {pyspark.__version__}): "
                      f"{INSTALL_HINT}")

from pyspark.errors import PySparkNotImplementedError  # noqa: E402 - after the version check
from pyspark.sql.datasource import DataSource  # noqa: E402

from .logread import log_schema  # noqa: E402
from .logsource import NSQLogBatchReader, NSQLogStreamReader, choose_reader, not_retained_on  # noqa: E402
from .options import OptionError, SinkOptions, SourceOptions  # noqa: E402
from .partitioned import NSQPartitionedReader  # noqa: E402
from .preflight import Unreachable, reach  # noqa: E402
from .sink import NSQStreamWriter, NSQWriter, PublishError  # noqa: E402
from .source import NSQStreamReader, source_schema  # noqa: E402


class NSQDataSource(DataSource):
    """The ``nsq`` format: ``readStream`` and ``read`` (a topic), ``write`` and ``writeStream`` (a topic).

    Three readers: ``reader=log`` (``logsource.py``: a retained topic read
    by offset; chosen without asking when the topic is retained on every
    nsqd it is read from, and the only one for batch reads), and for plain
    topics, read through a channel, ``reader=driver`` (the default,
    ``source.py``) and ``reader=executors`` (``partitioned.py``)."""

    @classmethod
    def name(cls) -> str:
        return "nsq"

    def _chosen(self) -> tuple[SourceOptions, str]:
        options = SourceOptions.parse(self.options)
        return options, choose_reader(options)

    def schema(self):
        """Asked only when reading, so the source's options are checked, and
        its nodes reached once, here: a mistake fails ``load()`` at once in
        one line rather than the started query."""
        options, reader = self._chosen()
        if reader == "log":
            return log_schema(options.dedup_key)
        options.require_channel()
        if reader == "executors" and not options.wal_path:
            raise OptionError("option reader=executors needs walPath: storage every executor sees, where a "
                              "partition's rows are kept until its batch commits (e.g. <checkpoint>/nsq-wal)")
        try:
            reach(options)
        except Unreachable as error:
            raise OptionError(str(error)) from None
        return source_schema(options.dedup_key)

    def streamReader(self, schema):
        """``reader=log`` or ``reader=executors``; otherwise Spark falls back
        to the driver reader."""
        options, reader = self._chosen()
        if reader == "log":
            return NSQLogStreamReader(options)
        if reader == "executors":
            return NSQPartitionedReader(options)
        raise PySparkNotImplementedError(errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "streamReader"})

    def simpleStreamReader(self, schema):
        return NSQStreamReader(SourceOptions.parse(self.options))

    def reader(self, schema):
        """Batch reads: a retained topic's records between two points."""
        options, reader = self._chosen()
        if reader != "log":
            raise OptionError(f"spark.read.format('nsq') reads retained topics only: "
                              f"{not_retained_on(options) or 'reader=' + reader + ' reads a channel'}")
        return NSQLogBatchReader(options)

    def writer(self, schema, overwrite: bool):
        _refuse_overwrite(overwrite)
        return NSQWriter(SinkOptions.parse(self.options), schema)

    def streamWriter(self, schema, overwrite: bool):
        _refuse_overwrite(overwrite)
        return NSQStreamWriter(SinkOptions.parse(self.options), schema)


def _refuse_overwrite(overwrite: bool) -> None:
    if overwrite:
        raise OptionError("publishing adds messages to a topic, it cannot overwrite one: use mode('append')")


def register(spark) -> None:
    """Make ``format("nsq")`` known to this SparkSession."""
    spark.dataSource.register(NSQDataSource)


__all__ = ["NSQDataSource", "OptionError", "PublishError", "register"]
