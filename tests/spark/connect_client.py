"""A Spark Connect client's round trip through the ``nsq`` data source, run
as its own process by test_connect.py (a process holds either a classic
session or a Connect one, and the suite's is classic).

    python -m tests.spark.connect_client sc://127.0.0.1:PORT NSQD_TCP NSQD_HTTP TOPIC RELAY_TOPIC WORKDIR READER COUNT

It publishes COUNT bodies with ``write.format("nsq")``, archives channel
``archive`` to ``WORKDIR/out`` (the archive query, availableNow), relays
channel ``relay`` to ``RELAY_TOPIC`` with ``writeStream.format("nsq")``,
and prints one JSON line: what the options check said, the session's
checkpoint manager, the archived batch sizes and each query's error (null
when none).
"""

import json
import os
import sys

from nsqpy.spark.archive import input_rows, start_archive
from nsqpy.spark.session import build_session


def bodies(topic: str, count: int) -> list[bytes]:
    return [f"{topic}-{i:05d}".encode() for i in range(count)]


def option_error(spark, options: dict) -> str:
    """The message an unknown reader fails with, as the client sees it. A Connect
    client's ``load()`` only builds a plan: the server checks it when asked
    for the schema (or when the query starts)."""
    try:
        spark.readStream.format("nsq").options(**options).option("reader", "banana").load().schema
    except Exception as error:  # the server's AnalysisException, carried over gRPC
        return str(error)
    return ""


def main(url, nsqd_tcp, nsqd_http, topic, relay_topic, workdir, reader, count) -> dict:
    spark = build_session(url, "nsqpy-connect-test")
    options = {"topic": topic, "nsqd_tcp_addresses": nsqd_tcp, "nsqd_http_addresses": nsqd_http,
               "reader": reader, **({"startingOffsets": "earliest"} if reader == "log" else {})}
    report = {"option_error": option_error(spark, {**options, "channel": "archive"}),
              "checkpoint_file_manager": spark.conf.get("spark.sql.streaming.checkpointFileManagerClass", None)}
    frame = spark.createDataFrame([(body,) for body in bodies(topic, int(count))], "body binary")
    frame.write.format("nsq").option("topic", topic).option("nsqd_tcp_addresses", nsqd_tcp).mode("append").save()

    archive = start_archive(spark, {**options, "channel": "archive"}, os.path.join(workdir, "out"),
                            os.path.join(workdir, "archive-ck"), available_now=True)
    archive.awaitTermination(120)
    report["archived_batches"] = [input_rows(p) for p in archive.recentProgress if input_rows(p)]
    report["archive_error"] = str(archive.exception()) if archive.exception() else None

    relay = (spark.readStream.format("nsq").options(**options).option("channel", "relay")
             .option("walPath", os.path.join(workdir, "relay-wal")).load().select("body")
             .writeStream.format("nsq").option("topic", relay_topic).option("nsqd_tcp_addresses", nsqd_tcp)
             .option("checkpointLocation", os.path.join(workdir, "relay-ck")).trigger(availableNow=True).start())
    relay.awaitTermination(120)
    report["relay_error"] = str(relay.exception()) if relay.exception() else None
    spark.stop()
    return report


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:])), flush=True)
