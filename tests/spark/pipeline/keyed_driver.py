"""A Spark driver for tests/spark/test_keyed_pipeline.py: a retained topic
read by the log reader, each body upper-cased by a Python UDF, written
keyed to another topic, until what is there now is done (availableNow).

    python keyed_driver.py TCP HTTP SOURCE DEST CHECKPOINT [KILL_AT MARKER]

With KILL_AT, the first Python worker to see that body SIGKILLs itself, as
the OOM killer would (once: MARKER notes it). Prints ``done`` at the end.
"""

import os
import signal
import sys

from pyspark.sql.functions import col, udf

import nsqpy.spark  # noqa: F401  (registers the nsq data source with the session)
from nsqpy.spark.session import build_session


def main(tcp: str, http: str, source: str, dest: str, checkpoint: str, kill_at: str = "", marker: str = "") -> None:
    spark = build_session("local[2]", "keyed-pipeline", {"spark.sql.shuffle.partitions": "2"})

    @udf("string")
    def shout(body):
        text = bytes(body).decode()
        if text == kill_at and not os.path.exists(marker):
            with open(marker, "w") as note:
                note.write("killed once\n")
            os.kill(os.getpid(), signal.SIGKILL)
        return text.upper()

    query = (spark.readStream.format("nsq").option("topic", source).option("nsqd_tcp_addresses", tcp)
             .option("nsqd_http_addresses", http).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", 1500).option("max_messages_per_partition", 500).load()
             .select(shout(col("body")).alias("body"))
             .writeStream.format("nsq").option("topic", dest).option("nsqd_tcp_addresses", tcp)
             .option("publish_keys", "true").option("mpub_max_messages", 100)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    print("done", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
