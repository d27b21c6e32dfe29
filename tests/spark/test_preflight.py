"""``nsq_to_parquet`` and ``load()`` refuse mistakes before Spark runs: one line, quickly.

The command runs with ``SPARK_HOME`` naming an empty directory: had it gone
on to start Spark, it would print its "starting Spark" line and fail with
Spark's own error, not the one line expected."""

import os
import socket
import subprocess
import sys
import tempfile

import pytest

pytestmark = pytest.mark.spark

NO_PYSPARK = ("import sys; sys.modules['pyspark'] = None; "
              "from nsqpy.cli.nsq_to_parquet import main; sys.exit(main(sys.argv[1:]))")


def _closed_port() -> str:
    """An address where nothing listens (bound and closed again)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def _run(*args, program=("-m", "nsqpy.cli.nsq_to_parquet")) -> tuple[int, str]:
    """(exit status, standard error) of a run that must not have started Spark."""
    with tempfile.TemporaryDirectory() as no_spark:
        done = subprocess.run([sys.executable, *program, *args], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "SPARK_HOME": no_spark})
    assert "starting Spark" not in done.stdout, done.stdout + done.stderr
    return done.returncode, done.stderr


@pytest.mark.parametrize("args, status, message", [
    (["--trigger=banana"], 2, "argument --trigger: 'banana' is not an interval like '10 seconds'"),
    (["--topic=b@d"], 2, "option topic: invalid topic name 'b@d'"),
    (["--channel=no way"], 2, "option channel: invalid name 'no way'"),
    (["--nsqd-tcp-address=nowhere"], 2, "option nsqd_tcp_addresses: 'nowhere' is not host:port"),
    (["--option=colour=red"], 2, "unknown option colour"),
    (["--option=max_messages_per_batch=many"], 2, "option max_messages_per_batch: expected int, got 'many'"),
    (["--nsqd-tcp-address={closed}"], 1, "cannot reach nsqd at {closed}: Connection refused"),
    (["--lookupd-http-address={closed}"], 1, "cannot reach nsqlookupd at {closed} (Connection refused)"),
    (["--output-dir=/proc/nsqpy/out"], 1, "--output-dir /proc/nsqpy/out cannot be created"),
], ids=["trigger", "topic", "channel", "address", "unknown-option", "option-value", "nsqd-down", "lookupd-down",
        "output-dir"])
def test_a_mistake_is_one_line_before_the_jvm(spark_nsqd, tmp_path, args, status, message):
    closed = _closed_port()
    defaults = {"--topic": "events", "--output-dir": str(tmp_path / "out")}
    given = {arg.split("=", 1)[0] for arg in args}
    command = [f"{flag}={value}" for flag, value in defaults.items() if flag not in given]
    if not any(arg.startswith(("--nsqd-tcp-address", "--lookupd-http-address")) for arg in args):
        command.append(f"--nsqd-tcp-address={spark_nsqd.tcp_address}")
    returncode, stderr = _run(*command, *(arg.format(closed=closed) for arg in args))
    assert (returncode, stderr.count("\n")) == (status, 1), stderr
    assert stderr.startswith("nsq_to_parquet: ") and message.format(closed=closed) in stderr


def test_the_executors_reader_without_nsqd_http_api_is_one_line_before_the_jvm(spark_nsqd, tmp_path):
    """nsqd's HTTP port is not its TCP port + 1 here, so it must be given."""
    returncode, stderr = _run("--topic=events", f"--output-dir={tmp_path}", "--reader=executors",
                              f"--nsqd-tcp-address={spark_nsqd.tcp_address}")
    assert (returncode, stderr.count("\n")) == (1, 1), stderr
    assert f"cannot find the HTTP API of nsqd at {spark_nsqd.tcp_address}" in stderr
    assert "give nsqd_http_addresses (--nsqd-http-address)" in stderr


def test_a_spark_home_without_spark_is_one_line_before_the_jvm(spark_nsqd, tmp_path):
    """A SPARK_HOME left from another install (here: an empty directory)."""
    returncode, stderr = _run("--topic=events", f"--output-dir={tmp_path}",
                              f"--nsqd-tcp-address={spark_nsqd.tcp_address}")
    assert (returncode, stderr.count("\n")) == (1, 1), stderr
    assert stderr.startswith("nsq_to_parquet: SPARK_HOME=") and "has no bin/spark-submit: unset it" in stderr


def test_without_pyspark_one_line_names_the_install_command(tmp_path):
    returncode, stderr = _run("--topic=events", f"--output-dir={tmp_path}", "--nsqd-tcp-address=127.0.0.1:4150",
                              program=("-c", NO_PYSPARK))
    assert returncode == 1 and stderr.count("\n") == 1, stderr
    assert "(pyspark is not installed): pip install 'nsqpy[spark]'" in stderr
    assert ".venv/bin/pip install -e '.[spark]'" in stderr


def test_load_reaches_nsqd_once_and_names_the_one_down(spark, topic):
    closed = _closed_port()
    reader = (spark.readStream.format("nsq").option("topic", topic).option("channel", "c")
              .option("nsqd_tcp_addresses", closed))
    with pytest.raises(Exception, match=f"cannot reach nsqd at {closed}"):
        reader.load()
    with pytest.raises(Exception, match="unknown option colour"):
        reader.option("colour", "red").load()
