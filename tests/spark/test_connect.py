"""The ``nsq`` data source from a Spark Connect client: a Connect server
started with ``nsqpy spark-connect-server`` on 127.0.0.1 (``connect_server``,
one for the module), and a client process (``connect_client.py``) that registers the source through its
session, publishes with ``write.format("nsq")``, archives with each reader
and relays with ``writeStream.format("nsq")``: every row checked here."""

import json
import sys

import pytest

from nsqpy.spark.session import CHECKPOINT_FILE_MANAGER
from tests.support.processes import GroupProcess
from tests.support.wire import http_json

from .conftest import bodies_other_readers_see, channel_stats
from .connect_client import bodies

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("reader", ["driver", "executors", "log"])
def test_a_connect_client_publishes_archives_and_relays_every_row_once(connect_server, spark_nsqd, topic, tmp_path,
                                                                         reader):
    relay_topic = f"{topic[:50]}_relay"
    assert http_json("POST", f"{spark_nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    if reader == "log":  # the archive and the relay read the topic's log
        assert http_json("POST", f"{spark_nsqd.http_url}/topic/config?topic={topic}&retention=1h")[0] == 200
    for channel in ("archive", "relay"):
        assert http_json("POST", f"{spark_nsqd.http_url}/channel/create?topic={topic}&channel={channel}")[0] == 200
    client = GroupProcess([sys.executable, "-m", "tests.spark.connect_client", connect_server.url,
                           spark_nsqd.tcp_address, spark_nsqd.http_address, topic, relay_topic, str(tmp_path),
                           reader, "2000"])
    try:
        assert client.wait(180) == 0, client.output[-6000:]
    finally:
        client.kill()
    report = json.loads(client.lines[-1])
    assert "option reader: 'banana' is not one of driver, executors, log" in report["option_error"]
    assert report["checkpoint_file_manager"] == CHECKPOINT_FILE_MANAGER  # renames in-process, as a classic session
    assert report["archive_error"] is None and report["relay_error"] is None
    assert sum(report["archived_batches"]) == 2000

    published = bodies(topic, 2000)
    assert bodies_other_readers_see(tmp_path / "out") == published
    for channel in ("archive", "relay") if reader != "log" else ():  # the log reader reads no channel
        stats = channel_stats(spark_nsqd, topic, channel)
        assert (stats["depth"], stats["in_flight_count"]) == (0, 0)
    _, relayed = http_json("GET", f"{spark_nsqd.http_url}/stats?format=json&topic={relay_topic}")
    assert relayed["topics"][0]["depth"] == 2000
