"""nsq_to_parquet with the log reader on a retained topic, and its faults:
a task's Python worker SIGKILLed mid-partition, the driver killed and the
query restarted from its checkpoint, nsqd killed and restarted under a
running batch. Every message archived exactly once in each."""

import os
import signal

import pytest

from nsqpy.localcluster import free_port
from tests.support.wire import http, http_json, wait_until

from .conftest import (TASK_FAULTS_DIR, archive_command, bodies_other_readers_see, committed_bodies, publish,
                       rows_at_least)
from .test_log_reader import retain

pytestmark = pytest.mark.spark


def faults_env(monkeypatch, **variables) -> None:
    """Spark's Python workers get the test's sitecustomize (task_faults/)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [TASK_FAULTS_DIR, os.environ.get("PYTHONPATH")])))
    for name, value in variables.items():
        monkeypatch.setenv(name, str(value))


def test_nsq_to_parquet_archives_a_retained_topic_by_offset(spark_nsqd, topic, tmp_path, archiver):
    retain(spark_nsqd, topic)
    bodies = [f"{topic}-{i:05d}".encode() for i in range(3000)]
    publish(spark_nsqd, topic, bodies)
    out = tmp_path / "out"
    running = archiver(archive_command(spark_nsqd, topic, out, "--available-now", "--status-every=0.5"))
    assert running.wait(240) == 0, running.output[-6000:]
    assert f"archiving what the log holds now of {topic} with the log reader" in running.output
    assert sorted(committed_bodies(out)) == bodies
    _, stats = http_json("GET", f"{spark_nsqd.http_url}/stats?format=json&topic={topic}")
    assert stats["topics"][0]["channels"] == []  # no channel made, nothing FINished


def test_a_worker_killed_mid_partition_is_retried_and_nothing_is_archived_twice(
        spark_nsqd, topic, tmp_path, archiver, monkeypatch):
    retain(spark_nsqd, topic)
    bodies = [f"{topic}-{i:05d}".encode() for i in range(4000)]
    publish(spark_nsqd, topic, bodies)
    faults, out = tmp_path / "faults", tmp_path / "out"
    faults.mkdir()
    faults_env(monkeypatch, NSQPY_TEST_LOG_FAULTS=faults)
    running = archiver(archive_command(spark_nsqd, topic, out, "--master=local[2,2]", "--available-now",
                                       "--option=max_messages_per_partition=1000"))
    assert running.wait(240) == 0, running.output[-6000:]
    assert len(os.listdir(faults)) >= 4  # every partition's first attempt was killed after its first rows
    assert "Python worker exited unexpectedly" in running.output
    assert sorted(committed_bodies(out)) == bodies


def test_a_killed_driver_resumes_from_its_checkpoint(spark_nsqd, topic, tmp_path, archiver):
    retain(spark_nsqd, topic)
    first = [f"{topic}-a-{i:05d}".encode() for i in range(3000)]
    publish(spark_nsqd, topic, first)
    out = tmp_path / "out"
    command = archive_command(spark_nsqd, topic, out, "--trigger=200 milliseconds", "--status-every=0.2",
                              "--option=maxOffsetsPerTrigger=500")
    running = archiver(command)
    running.wait_for(rows_at_least(1000), timeout=180)
    running.signal(signal.SIGKILL)  # the driver and its JVM, mid-stream
    running.wait(30)
    second = [f"{topic}-b-{i:05d}".encode() for i in range(1000)]
    publish(spark_nsqd, topic, second)
    running = archiver(command)
    wait_until(lambda: len(committed_bodies(out)) >= 4000 if (out / "_spark_metadata").exists() else False,
               timeout=180, interval=0.5)
    running.signal(signal.SIGINT)
    assert running.wait(90) == 0, running.output[-6000:]
    assert sorted(committed_bodies(out)) == sorted(first + second)
    # the restart removed what the killed run wrote and never committed: readers that list the folder agree
    assert bodies_other_readers_see(out) == sorted(first + second)


def test_nsqd_killed_and_restarted_under_a_batch(start_nsqd, topic, tmp_path, archiver, monkeypatch):
    data = tmp_path / "data"
    ports = [f"--tcp-address=127.0.0.1:{free_port()}", f"--http-address=127.0.0.1:{free_port()}"]
    nsqd = start_nsqd("--retention=1h", *ports, data_path=data)
    bodies = [f"{topic}-{i:05d}".encode() for i in range(20_000)]
    publish(nsqd, topic, bodies)
    faults_env(monkeypatch, NSQPY_TEST_LOG_SLOW=0.3)
    out = tmp_path / "out"
    running = archiver(archive_command(nsqd, topic, out, "--trigger=200 milliseconds", "--status-every=0.2",
                                       "--option=max_messages_per_partition=500", "--option=readTimeout=120"))
    running.wait_for(rows_at_least(1), timeout=180)
    nsqd.kill()  # tasks of the batch under way are reading from it
    nsqd = start_nsqd("--retention=1h", *ports, data_path=data)  # back on the same ports: the tasks go on
    wait_until(lambda: (out / "_spark_metadata").exists() and len(committed_bodies(out)) >= len(bodies),
               timeout=240, interval=0.5)
    running.signal(signal.SIGINT)
    assert running.wait(90) == 0, running.output[-6000:]
    assert sorted(committed_bodies(out)) == bodies
    assert http("GET", f"{nsqd.http_url}/ping")[0] == 200
