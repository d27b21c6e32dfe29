"""One local Spark session (``local[2]``) and one nsqd for the whole Spark suite.

Starting a JVM costs seconds, so the session is shared; every test uses its
own topic (and its own temporary directories), so tests do not see each
other's messages or checkpoints.
"""

import json
import socket
import time
import urllib.request

import pytest

from nsqpy.client.sync import SyncProducer
from nsqpy.localcluster import nsqd_process
from nsqpy.spark.session import build_session

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def spark():
    session = build_session("local[2]", "nsqpy-tests", {"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_nsqd(tmp_path_factory):
    """nsqd with a short message timeout (so TOUCH matters) and room for big batches."""
    with nsqd_process(str(tmp_path_factory.mktemp("spark-nsqd")), "--msg-timeout=3s",
                      "--max-rdy-count=20000") as daemon:
        yield daemon


def publish(nsqd, topic: str, bodies: list[bytes], chunk: int = 500) -> None:
    with SyncProducer(nsqd.tcp_address) as producer:
        for i in range(0, len(bodies), chunk):
            producer.multi_publish(topic, bodies[i:i + chunk])


def channel_stats(nsqd, topic: str, channel: str) -> dict:
    url = f"{nsqd.http_url}/stats?format=json&topic={topic}&channel={channel}&include_clients=false"
    with urllib.request.urlopen(url, timeout=5) as response:
        topics = json.load(response)["topics"] or []
    for entry in topics:
        for stats in entry["channels"]:
            if stats["channel_name"] == channel:
                return stats
    return {}


def source_options(nsqd, topic: str, channel: str = "archive", **extra) -> dict:
    return {"topic": topic, "channel": channel, "nsqd_tcp_addresses": nsqd.tcp_address,
            "nsqd_http_addresses": nsqd.http_address, **{k: str(v) for k, v in extra.items()}}


def free_port() -> int:
    """A loopback port for a daemon that must come back on the same address."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_registration(lookupd, topic: str, nodes: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://{lookupd.http_address}/lookup?topic={topic}", timeout=5) as answer:
                if len(json.load(answer)["producers"]) >= nodes:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{nodes} nsqd did not register {topic} with nsqlookupd in {timeout}s")


def archived_bodies(spark, path) -> list[bytes]:
    """Bodies Spark's file sink committed (its _spark_metadata log decides)."""
    return [bytes(row.body) for row in spark.read.parquet(str(path)).select("body").collect()]
