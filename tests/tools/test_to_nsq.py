"""to_nsq: stdin records to a topic on every nsqd given."""

import subprocess
import time

from tests.tools.helpers import channel_stats, create_channel, drain, eventually, publish, run_tool


def test_records_to_every_nsqd_in_order(start_nsqd, topic):
    nodes = [start_nsqd(), start_nsqd()]
    for node in nodes:
        create_channel(node, topic, "c")
    records = [b"record %d " % i + b"x" * (i % 300) for i in range(3000)]
    stdin = b"\n".join(records[:1500]) + b"\n\n\n" + b"\n".join(records[1500:])  # empty records skipped, no final \n
    result = run_tool("to_nsq", f"--topic={topic}", *(f"--nsqd-tcp-address={n.tcp_address}" for n in nodes),
                      stdin=stdin)
    assert result.returncode == 0, result.stderr.decode()
    for node in nodes:
        assert drain(node, topic, "c") == records


def test_delimiter_and_producer_opts(nsqd, topic):
    create_channel(nsqd, topic, "c")
    result = run_tool("to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={nsqd.tcp_address}", "--delimiter=,",
                      "--producer-opt=snappy", "--producer-opt=client_id,loader", stdin=b"a,b\nc,,d,")
    assert result.returncode == 0, result.stderr.decode()
    assert drain(nsqd, topic, "c") == [b"a", b"b\nc", b"d"]


def test_rate_throttles(nsqd, topic):
    create_channel(nsqd, topic, "c")
    started = time.monotonic()
    result = run_tool("to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={nsqd.tcp_address}", "--rate=10",
                      stdin=b"\n".join(b"%d" % i for i in range(25)))
    assert result.returncode == 0, result.stderr.decode()
    assert time.monotonic() - started >= 1.5  # 25 at 10/s, one second's worth saved up at most
    assert drain(nsqd, topic, "c") == [b"%d" % i for i in range(25)]


def test_a_refused_publish_is_one_line(start_nsqd, topic):
    small = start_nsqd("--max-msg-size=100")
    publish(small, topic, [b"fits"])
    result = run_tool("to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={small.tcp_address}",
                      stdin=b"ok\n" + b"y" * 500 + b"\n")
    assert result.returncode == 1
    error = result.stderr.decode()
    assert "Traceback" not in error and f"publishing to {topic} failed" in error and "E_BAD_MESSAGE" in error


def test_sigterm_publishes_what_was_read_and_exits(nsqd, topic, start_tool):
    create_channel(nsqd, topic, "c")
    tool = start_tool("to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={nsqd.tcp_address}", stdin=subprocess.PIPE)
    tool.process.stdin.write(b"one\ntwo\n")
    tool.process.stdin.flush()
    eventually(lambda: channel_stats(nsqd, topic, "c").get("depth") == 2)
    assert tool.stop() == 0  # stdin still open: the signal ends it
    assert drain(nsqd, topic, "c") == [b"one", b"two"]


def test_a_rerun_with_the_same_key_prefix_queues_only_what_the_last_run_had_not(nsqd, topic):
    create_channel(nsqd, topic, "c")
    records = [b"record %d" % i for i in range(300)]
    for stdin in (b"\n".join(records[:200]), b"\n".join(records)):  # the first run stopped after 200
        result = run_tool("to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={nsqd.tcp_address}",
                          "--key-prefix=load-2026-11-29", stdin=stdin)
        assert result.returncode == 0, result.stderr.decode()
    assert drain(nsqd, topic, "c") == records


def test_a_bad_key_prefix_is_one_line(nsqd, topic):
    result = run_tool("to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={nsqd.tcp_address}",
                      "--key-prefix=has space", stdin=b"x")
    assert result.returncode != 0
    assert b"--key-prefix must be at most 100 printable ASCII characters without spaces" in result.stderr
