"""Spark's own task retries under the executors reader: nsq_to_parquet on
``local[2,2]`` (a task may fail once), each partition's first attempt made to
fail right after its partition log is written (``task_faults/``: an even
partition raises, an odd one has its Python worker SIGKILLed), and every
message still archived exactly once: the retries replay the log, and the
messages nsqd requeued when the failed attempts' connections closed are
dropped when they come again."""

import os
import re
import signal

import pytest

from tests.support.wire import wait_until

from .conftest import (TASK_FAULTS_DIR, archive_command, bodies_other_readers_see, channel_stats, committed_bodies,
                       publish, rows_at_least)

pytestmark = pytest.mark.spark


def test_tasks_failing_after_their_log_write_are_retried_and_every_message_is_archived_once(
        spark_nsqd, topic, tmp_path, archiver, monkeypatch):
    bodies = [f"{topic}-{i:05d}".encode() for i in range(3000)]
    publish(spark_nsqd, topic, bodies)
    faults, out = tmp_path / "faults", tmp_path / "out"
    faults.mkdir()
    workers_path = [TASK_FAULTS_DIR, os.environ.get("PYTHONPATH")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, workers_path)))
    monkeypatch.setenv("NSQPY_TEST_TASK_FAULTS", str(faults))
    running = archiver(archive_command(spark_nsqd, topic, out, "--master=local[2,2]", "--reader=executors",
                                       "--trigger=200 milliseconds", "--status-every=0.2",
                                       "--max-messages-per-batch=1000", "--option=max_messages_per_partition=500"))
    running.wait_for(rows_at_least(len(bodies)), timeout=120)

    def drained():
        stats = channel_stats(spark_nsqd, topic, "nsq_to_parquet")
        return (stats["depth"], stats["in_flight_count"]) == (0, 0)

    wait_until(drained, timeout=60, interval=0.2)
    running.signal(signal.SIGINT)
    assert running.wait(60) == 0, running.output[-6000:]
    assert "nsq_to_parquet: stopped" in running.output

    # every partition with rows failed once: batch 1's two by both means, and Spark retried them
    failed = sorted(path.name for path in faults.iterdir())
    assert {"batch-1-part-0", "batch-1-part-1"} <= set(failed)
    assert "RuntimeError: injected failure of batch 1 partition 0 after its log write" in running.output
    assert re.search(r"Lost task .*Python worker exited unexpectedly", running.output)
    archived = committed_bodies(out)
    assert sorted(archived) == bodies
    assert bodies_other_readers_see(out) == bodies
