"""What a new user meets first, against real nsqd: nsq_to_file's lines on
disk at once, nsq_to_nsq waiting for a destination that is not up yet and
saying so of a body its JSON filters cannot read, to_nsq refusing a bad
topic name."""

import os
import socket

from tests.support.wire import http_json
from tests.tools.helpers import channel_stats, create_channel, drain, eventually, publish, run_tool
from tests.tools.test_nsq_to_nsq import FAST_RETRY, settled_source

CAPPED_REQUEUE = "--consumer-opt=max_requeue_delay,500ms"  # redelivered soon however often it failed


def free_port() -> int:
    """A loopback port nothing listens on (for a daemon started later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def finished(nsqd, topic: str, channel: str) -> int:
    stats = channel_stats(nsqd, topic, channel)
    return stats["message_count"] - stats["depth"] - stats["in_flight_count"] - stats["deferred_count"]


def test_nsq_to_file_writes_lines_before_the_first_sync(nsqd, topic, tmp_path, start_tool):
    out = tmp_path / "archive"
    tool = start_tool("nsq_to_file", f"--topic={topic}", f"--nsqd-tcp-address={nsqd.tcp_address}",
                      f"--output-dir={out}", "--sync-interval=60s", "--datetime-format=%Y")
    tool.wait_for_log("connected to")
    publish(nsqd, topic, [b"one", b"two", b"three"])
    # the sync interval is 60 s: lines seen well before it were written as they came
    eventually(lambda: [(out / name).read_bytes() for name in os.listdir(out)] == [b"one\ntwo\nthree\n"],
               timeout=10)
    assert tool.stop() == 0, tool.stderr.decode()
    eventually(lambda: finished(nsqd, topic, "nsq_to_file") == 3)
    assert [(out / name).read_bytes() for name in os.listdir(out)] == [b"one\ntwo\nthree\n"]


def test_nsq_to_nsq_waits_for_a_destination_that_comes_up_later(start_nsqd, topic, start_tool):
    source = start_nsqd()
    port = free_port()
    tool = start_tool("nsq_to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={source.tcp_address}",
                      f"--destination-nsqd-tcp-address=127.0.0.1:{port}", *FAST_RETRY, CAPPED_REQUEUE)
    tool.wait_for_log(f"cannot publish to nsqd at 127.0.0.1:{port}")
    bodies = [b"first", b"second", b"third"]
    publish(source, topic, bodies)
    # tried, refused, tried again (or gave up: the failure the assertion shows)
    eventually(lambda: tool.stderr.count(b"failed, requeued") >= 2 or tool.process.poll() is not None)
    assert tool.process.poll() is None, tool.stderr.decode()
    assert finished(source, topic, "nsq_to_nsq") == 0  # nothing FINished before a destination took it
    destination = start_nsqd(f"--tcp-address=127.0.0.1:{port}")
    create_channel(destination, topic, "c")
    settled_source(source, topic, 3)
    assert tool.stop() == 0, tool.stderr.decode()
    eventually(lambda: channel_stats(destination, topic, "c").get("depth") == 3)
    assert sorted(drain(destination, topic, "c")) == sorted(bodies)
    assert b"Traceback" not in tool.stderr


def test_nsq_to_nsq_logs_undecodable_json_without_flooding(start_nsqd, topic, start_tool):
    source, destination = start_nsqd(), start_nsqd()
    create_channel(destination, topic, "c")
    flood = [b"not json %d" % i for i in range(3000)]
    publish(source, topic, flood + [b'[1, 2]', b'{"kind": "keep"}'])
    tool = start_tool("nsq_to_nsq", f"--topic={topic}", f"--nsqd-tcp-address={source.tcp_address}",
                      f"--destination-nsqd-tcp-address={destination.tcp_address}", "--require-json-field=kind")
    settled_source(source, topic, len(flood) + 2)  # dropped (FINished) as NSQ's tool drops them
    assert tool.stop() == 0
    logged = [line for line in tool.stderr.decode().splitlines() if "Unable to decode json" in line]
    assert logged and "ERROR: Unable to decode json: not json 0" in logged[0]
    assert len(logged) <= 5, logged  # one line per ten seconds, however many came
    assert drain(destination, topic, "c") == [b'{"kind": "keep"}']


def test_to_nsq_refuses_a_bad_topic_name(nsqd):
    result = run_tool("to_nsq", "--topic=bad topic!", f"--nsqd-tcp-address={nsqd.tcp_address}", stdin=b"one\n")
    assert result.returncode == 2
    assert result.stderr.decode().splitlines() == [
        "to_nsq: --topic 'bad topic!' is invalid (1-64 characters of [.a-zA-Z0-9_-], optionally ending in #ephemeral)"]
    assert http_json("GET", f"{nsqd.http_url}/stats?format=json")[1]["topics"] in ([], None)  # nothing reached nsqd
