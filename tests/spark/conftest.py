"""One local Spark session (``local[2]``) and one nsqd for the Spark tests of
a test process (each pytest-xdist worker has its own pair).

Starting a JVM costs seconds, so the session is shared; every test uses its
own topic (and its own temporary directories), so tests do not see each
other's messages or checkpoints.
"""

import json
import os
import sys
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import pytest

from nsqpy.client.sync import SyncProducer
from nsqpy.localcluster import nsqd_process
from nsqpy.spark.session import build_session
from tests.support.processes import GroupProcess
from tests.support.wire import http_json, wait_until

pytestmark = pytest.mark.spark

# a sitecustomize that makes executors-reader partitions fail once (see its docstring)
TASK_FAULTS_DIR = os.path.join(os.path.dirname(__file__), "task_faults")


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
    """The channel's entry in nsqd's /stats ({} while it does not exist)."""
    _, stats = http_json("GET", f"{nsqd.http_url}/stats?format=json&topic={topic}&include_clients=false")
    for entry in stats["topics"] or []:
        for found in entry["channels"]:
            if found["channel_name"] == channel:
                return found
    return {}


def starve_until_timed_out(fetcher, nsqd, topic: str, count: int, channel: str = "archive") -> None:
    """A machine too busy for the fetcher's TOUCHes: its event loop blocked
    (no TOUCH leaves) until nsqd has timed out ``count`` messages of the channel."""
    starved = threading.Event()
    fetcher._loop.call_soon_threadsafe(starved.wait, 60)
    try:
        wait_until(lambda: channel_stats(nsqd, topic, channel)["timeout_count"] >= count, timeout=30)
    finally:
        starved.set()


def source_options(nsqd, topic: str, channel: str = "archive", **extra) -> dict:
    return {"topic": topic, "channel": channel, "nsqd_tcp_addresses": nsqd.tcp_address,
            "nsqd_http_addresses": nsqd.http_address, **{k: str(v) for k, v in extra.items()}}


def archive_available_now(spark, options: dict, out, checkpoint) -> list[int]:
    """Run the archive query once under availableNow; the sizes of its batches."""
    from nsqpy.spark.archive import start_archive

    query = start_archive(spark, options, str(out), str(checkpoint), available_now=True)
    query.awaitTermination(120)
    assert query.exception() is None
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def wait_for_registration(lookupd, topic: str, nodes: int) -> None:
    wait_until(lambda: len((http_json("GET", f"{lookupd.http_url}/lookup?topic={topic}")[1] or {})
                           .get("producers") or []) >= nodes, timeout=10)


def archived_bodies(spark, path) -> list[bytes]:
    """Bodies Spark's file sink committed (its _spark_metadata log decides)."""
    return [bytes(row.body) for row in spark.read.parquet(str(path)).select("body").collect()]


def committed_bodies(path) -> list[bytes]:
    """The bodies ``archived_bodies`` finds, without a session (so a test
    whose job runs in its own process needs no JVM of its own to check it):
    the files the file sink's log lists, read with pyarrow. The log, in
    ``_spark_metadata``, is the newest ``<batch>.compact`` and the batch
    files after it, each a ``v1`` line and then one JSON entry per file."""
    import pyarrow.parquet

    log = Path(path) / "_spark_metadata"
    batches = {int(entry.name.split(".")[0]): entry for entry in log.iterdir() if entry.name[0].isdigit()}
    compacts = [batch for batch, entry in batches.items() if entry.name.endswith(".compact")]
    first = max(compacts, default=0)
    files: dict[str, bool] = {}
    for batch in sorted(batch for batch in batches if batch >= first):
        version, *entries = batches[batch].read_text().splitlines()
        assert version == "v1", f"{batches[batch]}: {version}"
        for entry in map(json.loads, entries):
            files[urllib.parse.urlparse(entry["path"]).path] = entry["action"] == "add"
    return [body for file, added in files.items() if added
            for body in pyarrow.parquet.read_table(file, columns=["body"]).column("body").to_pylist()]


def bodies_other_readers_see(path) -> list[bytes]:
    """Bodies pyarrow's dataset reader sees in the archive; pandas must agree.
    Both list the directory (no ``_spark_metadata``), as DuckDB and polars do."""
    import pandas
    import pyarrow.dataset

    seen = pyarrow.dataset.dataset(str(path), format="parquet", partitioning="hive").to_table(columns=["body"])
    bodies = sorted(seen.column("body").to_pylist())
    assert sorted(pandas.read_parquet(str(path), columns=["body"])["body"]) == bodies
    return bodies


@pytest.fixture
def archiver():
    """Start nsq_to_parquet processes; each is killed at teardown, whatever happens."""
    started: list[GroupProcess] = []

    def start(command):
        started.append(GroupProcess(command))
        return started[-1]

    yield start
    for running in started:
        running.kill()


def archive_command(nsqd, topic, out, *extra):
    """``nsq_to_parquet`` on ``local[2]`` (a later ``--master`` wins)."""
    return [sys.executable, "-m", "nsqpy.cli.nsq_to_parquet", f"--topic={topic}",
            f"--nsqd-tcp-address={nsqd.tcp_address}", f"--nsqd-http-address={nsqd.http_address}",
            f"--output-dir={out}", "--master=local[2]", "--conf=spark.sql.shuffle.partitions=2", *extra]


def rows_at_least(rows: int):
    """A status line (``batches 3, rows 1200 (400/s), lag ...``) reporting ``rows`` or more."""
    return lambda line: line.startswith("batches ") and int(line.split("rows ")[1].split()[0]) >= rows


@dataclass
class ConnectServer:
    url: str  # sc://127.0.0.1:<port>
    process: GroupProcess  # its output, for what it logs


@pytest.fixture(scope="module")
def connect_client_packages():
    """Part of the ``spark`` extra: missing means a broken install, not a skip."""
    try:
        import grpc  # noqa: F401
    except ImportError:
        pytest.fail("Spark Connect needs the spark extra's grpcio, grpcio-status, googleapis-common-protos "
                    "and zstandard: .venv/bin/pip install -e '.[spark]'")


@pytest.fixture(scope="module")
def connect_server(connect_client_packages):
    """docs/spark.md's ``nsqpy spark-connect-server`` on ``local[2]`` (a port
    the system picks), in an environment without PYSPARK_PYTHON, one per test
    module (clients of other modules do not reach it), stopped at the end of
    the module whatever happened."""
    server = GroupProcess([os.path.join(os.path.dirname(sys.executable), "nsqpy"), "spark-connect-server",
                           "--master=local[2]", "--port=0", "--conf=spark.ui.enabled=false",
                           "--conf=spark.sql.shuffle.partitions=2"],
                          env={"PYSPARK_PYTHON": "", "PYSPARK_DRIVER_PYTHON": ""})
    try:
        port = server.wait_for(r"Spark Connect server started at: \S+:(\d+)", timeout=90).group(1)
        yield ConnectServer(f"sc://127.0.0.1:{port}", server)
    finally:
        server.stop()
