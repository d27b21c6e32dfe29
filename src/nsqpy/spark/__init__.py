"""NSQ and Apache Spark: topics as streaming DataFrames, DataFrames to topics.

    import nsqpy.spark
    nsqpy.spark.register(spark)
    df = (spark.readStream.format("nsq").option("topic", "events")
          .option("channel", "archive").option("lookupd_http_addresses", "127.0.0.1:4161").load())

Needs the ``spark`` extra (``pip install 'nsqpy[spark]'``): PySpark 4.2 or
newer, whose Python data source API has admission control and
``Trigger.AvailableNow``, and PyArrow.
"""

import pyspark

_MAJOR, _MINOR = (int(part) for part in pyspark.__version__.split(".")[:2])
if (_MAJOR, _MINOR) < (4, 2):
    # earlier versions run a single batch under availableNow and never commit it
    raise ImportError(f"nsqpy.spark needs PySpark 4.2 or newer (found {pyspark.__version__}): "
                      "pip install 'nsqpy[spark]'")

from pyspark.sql.datasource import DataSource  # noqa: E402 - after the version check

from .options import OptionError, SinkOptions, SourceOptions  # noqa: E402
from .sink import NSQStreamWriter, NSQWriter, PublishError  # noqa: E402
from .source import NSQStreamReader, source_schema  # noqa: E402


class NSQDataSource(DataSource):
    """The ``nsq`` format: ``readStream`` (a channel), ``write`` and ``writeStream`` (a topic)."""

    @classmethod
    def name(cls) -> str:
        return "nsq"

    def schema(self):
        """Asked only when reading, so the source's options are checked here:
        a mistake fails ``load()`` at once rather than the started query."""
        return source_schema(SourceOptions.parse(self.options).dedup_key)

    def simpleStreamReader(self, schema):
        return NSQStreamReader(SourceOptions.parse(self.options))

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
