"""``nsq_to_parquet`` as a real subprocess: Ctrl-C, the driver killed mid-batch,
a backlog another consumer holds, and the flags each reader takes."""

import collections
import os
import signal
import subprocess

import pytest

from nsqpy.spark.archive import start_archive
from tests.support.wire import WireConn, http

from .conftest import (archive_command, archived_bodies, bodies_other_readers_see, channel_stats, committed_bodies,
                       publish, rows_at_least, source_options)
from .test_log_reader import retain

# several JVM starts (or a standalone cluster) per test: minutes on a busy 2-core machine
pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def _archive_the_rest(spark, nsqd, topic, out, wal: bool = False) -> None:
    """What a restarted ``nsq_to_parquet --available-now [--wal]`` does, in this
    process's session (a JVM less to start): same checkpoint, same log."""
    checkpoint = out / "_checkpoint"
    options = source_options(nsqd, topic, "nsq_to_parquet")
    if wal:
        options["walPath"] = str(checkpoint / "nsq-wal")
    query = start_archive(spark, options, str(out), str(checkpoint), available_now=True)
    query.awaitTermination(120)
    assert query.exception() is None


def test_ctrl_c_acknowledges_what_is_archived_and_nothing_else(spark, spark_nsqd, topic, tmp_path, archiver):
    bodies = [f"{topic}-{i:06d}".encode() for i in range(6000)]
    publish(spark_nsqd, topic, bodies)
    out = tmp_path / "out"
    running = archiver(archive_command(spark_nsqd, topic, out, "--trigger=300 milliseconds",
                                       "--status-every=0.2", "--max-messages-per-batch=500"))
    running.wait_for(rows_at_least(500), timeout=90)
    running.signal(signal.SIGINT)
    assert running.wait(120) == 0, running.output
    assert "nsq_to_parquet: stopped" in running.output

    archived = archived_bodies(spark, out)
    stats = channel_stats(spark_nsqd, topic, "nsq_to_parquet")
    assert stats["in_flight_count"] == 0
    assert len(set(archived)) == len(archived) and stats["depth"] == len(bodies) - len(archived)

    _archive_the_rest(spark, spark_nsqd, topic, out)
    assert sorted(archived_bodies(spark, out)) == bodies


@pytest.mark.parametrize("wal", [False, True], ids=["nsqd-redelivers", "write-ahead-log"])
def test_driver_killed_mid_batch_loses_nothing(spark, spark_nsqd, topic, tmp_path, archiver, wal, capsys):
    """SIGKILL to the whole driver (Python, JVM, reader process) while batches
    run; the restart from the checkpoint archives every message, and Parquet
    readers other than Spark see exactly what Spark's log committed. Copies are
    possible without the log (a batch committed, not yet FINished) and
    counted; with the log there are none."""
    bodies = [f"{topic}-{i:06d}".encode() for i in range(8000)]
    publish(spark_nsqd, topic, bodies)
    out = tmp_path / "out"
    extra = ["--wal"] if wal else []
    running = archiver(archive_command(spark_nsqd, topic, out, "--trigger=0 seconds", "--status-every=0.1",
                                       "--max-messages-per-batch=400", *extra))
    running.wait_for(rows_at_least(1200), timeout=90)
    running.kill()

    _archive_the_rest(spark, spark_nsqd, topic, out, wal)
    archived = archived_bodies(spark, out)
    assert set(archived) == set(bodies)
    # what the killed run wrote but never committed is gone: pyarrow and pandas read what Spark reads
    assert bodies_other_readers_see(out) == sorted(archived)
    copies = sum(n - 1 for n in collections.Counter(archived).values())
    with capsys.disabled():
        print(f"\n  driver killed mid-batch ({'with' if wal else 'without'} write-ahead log): "
              f"{len(bodies)} messages, none lost, {copies} archived twice")
    if wal:
        assert copies == 0
    assert channel_stats(spark_nsqd, topic, "nsq_to_parquet")["in_flight_count"] == 0


def test_available_now_waits_for_messages_another_consumer_holds_then_says_so(start_nsqd, topic, tmp_path):
    """The backlog in flight to another consumer of the channel (a stale run,
    another job): nothing to archive yet, and exiting 0 would say it is all
    archived. The run waits --held-wait, then names the holder and exits 3;
    once that consumer lets go, the next run archives everything. The holder
    keeps its messages for the whole run, however slow the machine: an nsqd
    of its own with a 10 minute message timeout (under the Spark nsqd's 3 s
    they timed out and went round again during the run), and heartbeats 10
    minutes apart (it answers none, and a run over a minute long saw nsqd
    drop it for silence at NSQ's 30 s, its messages back in the queue)."""
    nsqd = start_nsqd("--msg-timeout=10m", "--max-heartbeat-interval=10m")
    publish(nsqd, topic, [b"held-%d" % i for i in range(50)])
    out = tmp_path / "out"
    command = archive_command(nsqd, topic, out, "--available-now", "--held-wait=1", "--channel=shared")
    with WireConn(nsqd.tcp_hostport) as other:
        other.identify(client_id="stale-run", hostname="worker7", heartbeat_interval=600_000)
        other.subscribe(topic, "shared", rdy=100)
        other.messages(50, timeout=30)
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 3, result.stderr
    held_line = [line for line in result.stderr.splitlines() if line.startswith("nsq_to_parquet: 50 messages")]
    assert len(held_line) == 1 and "worker7 (client_id 'stale-run'" in held_line[0], result.stderr
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert sorted(bodies_other_readers_see(out)) == sorted(b"held-%d" % i for i in range(50))


@pytest.mark.parametrize("reader", ["driver", "executors"])
def test_messages_another_consumer_gives_back_during_the_run_are_archived_by_it(start_nsqd, topic, tmp_path,
                                                                                 archiver, reader):
    """A stale run's batch, still held when this run starts and given back
    while it reads (that run's connection drops): it was part of what the
    channel held, so this run archives it, rather than leave as many others
    unread and exit 0 because nobody holds anything at its end."""
    nsqd = start_nsqd("--msg-timeout=10m", "--max-heartbeat-interval=10m")
    held = [b"held-%d" % i for i in range(50)]
    ready = [b"ready-%d" % i for i in range(2000)]
    publish(nsqd, topic, held)
    out = tmp_path / "out"
    with WireConn(nsqd.tcp_hostport) as other:
        other.identify(client_id="stale-run", hostname="worker7", heartbeat_interval=600_000)
        other.subscribe(topic, "shared", rdy=len(held))
        other.messages(len(held), timeout=30)
        publish(nsqd, topic, ready)
        # given back once the run has begun to read (its budget is set by then), ten batches before its end;
        # idle_timeout: the driver reader waits that long for what is owed, however late the give-back
        running = archiver(archive_command(nsqd, topic, out, "--available-now", "--held-wait=1",
                                           "--channel=shared", f"--reader={reader}", "--option=idle_timeout=60",
                                           "--max-messages-per-batch=200", "--status-every=0.1"))
        running.wait_for(rows_at_least(1), timeout=240)
    assert running.wait(240) == 0, running.output
    assert sorted(bodies_other_readers_see(out)) == sorted(held + ready)


def test_checkpoint_writes_start_no_process(spark_nsqd, topic, tmp_path):
    """Hadoop's FileContext renames on a local disk run ``readlink`` as a
    process for each rename (tens of ms a batch, for each of the offset,
    commit and sink logs); the sessions nsqpy builds rename in-process.
    Every ``readlink`` the run starts is recorded by one found first on PATH."""
    bodies = [b"batch-%d" % i for i in range(30)]
    publish(spark_nsqd, topic, bodies)
    tools, calls = tmp_path / "bin", tmp_path / "readlink-calls"
    tools.mkdir()
    recorder = tools / "readlink"
    recorder.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec /usr/bin/readlink "$@"\n')
    recorder.chmod(0o755)
    out = tmp_path / "out"
    result = subprocess.run(archive_command(spark_nsqd, topic, out, "--available-now", "--channel=renames",
                                            "--max-messages-per-batch=10"),
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"})
    assert result.returncode == 0, result.stderr
    assert sorted(bodies_other_readers_see(out)) == sorted(bodies)
    recorded = calls.read_text().splitlines() if calls.exists() else []
    assert not [call for call in recorded if str(out) in call], recorded


def test_ctrl_c_during_start_up_is_one_line_and_exit_130(spark_nsqd, topic, tmp_path, archiver):
    """Ctrl-C (SIGINT to the terminal's process group) while Spark starts,
    before the query runs: no py4j tracebacks, Python's exit status for it."""
    running = archiver(archive_command(spark_nsqd, topic, tmp_path / "out"))
    running.wait_for("^nsq_to_parquet: starting Spark")
    os.killpg(running.process.pid, signal.SIGINT)
    assert running.process.wait(60) == 130, running.output
    assert "Traceback" not in running.output, running.output
    ours = [line for line in running.output.splitlines() if line.startswith("nsq_to_parquet: ")]
    assert ours[-1] == "nsq_to_parquet: interrupted before archiving began; nothing was read", running.output


def test_a_run_prints_its_own_lines_and_none_of_sparks_start_and_stop_noise(spark_nsqd, topic, tmp_path):
    publish(spark_nsqd, topic, [b"quiet-%d" % i for i in range(20)])
    result = subprocess.run(archive_command(spark_nsqd, topic, tmp_path / "out", "--available-now",
                                            "--channel=quiet"),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    for noise in ("incubator modules", "log4j", "setLogLevel", "NativeCodeLoader", "adaptive.enabled",
                  "falling behind", "Failed to cancel job group", "replayed empty"):
        assert noise not in result.stderr + result.stdout, result.stderr
    assert all(line.startswith(("nsq_to_parquet: ", "batches ")) for line in result.stdout.splitlines())


def test_max_messages_per_batch_caps_the_log_readers_batches(spark_nsqd, topic, tmp_path):
    """Before, the log reader ignored it: a 600,000-message backlog was one
    batch, however small the flag."""
    retain(spark_nsqd, topic)
    bodies = [f"{topic}-{i:05d}".encode() for i in range(2500)]
    publish(spark_nsqd, topic, bodies)
    out = tmp_path / "out"
    result = subprocess.run(archive_command(spark_nsqd, topic, out, "--available-now", "--max-messages-per-batch=1000"),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "with the log reader" in result.stdout
    status = [line for line in result.stdout.splitlines() if line.startswith("batches ")]
    assert status[-1].startswith("batches 3, rows 2500 "), result.stdout
    assert sorted(committed_bodies(out)) == bodies


@pytest.mark.parametrize("flag", ["--starting-timestamp=1764400000000", "--starting-offsets=latest"])
def test_a_start_asked_of_a_plain_topic_is_refused_before_spark_starts(spark_nsqd, topic, tmp_path, flag):
    """Before: ignored, the run read the channel and exited 0."""
    assert http("POST", f"{spark_nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    result = subprocess.run(archive_command(spark_nsqd, topic, tmp_path / "out", "--available-now", flag),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("nsq_to_parquet: ")]
    name = {"--starting-timestamp": "startingTimestamp", "--starting-offsets": "startingOffsets"}[flag.split("=")[0]]
    assert line.startswith(f"nsq_to_parquet: option {name} needs a retained topic, read by offset "
                           f"(docs/retention.md), and topic {topic} is not retained on nsqd "
                           f"{spark_nsqd.tcp_address}"), line
    assert "starting Spark" not in result.stdout


def test_an_end_asked_of_the_archive_stream_is_refused_before_spark_starts(spark_nsqd, topic, tmp_path):
    """Before: ignored, the run read what the log held and exited 0."""
    retain(spark_nsqd, topic)
    result = subprocess.run(archive_command(spark_nsqd, topic, tmp_path / "out", "--available-now",
                                            "--option=endingOffsets=latest"),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("nsq_to_parquet: ")]
    assert line.startswith("nsq_to_parquet: option endingOffsets: a stream has no end"), line
    assert "starting Spark" not in result.stdout
