"""nsq_tail: bodies to stdout, one per line, exactly; -n; several topics; a closed pipe."""

import subprocess

from tests.tools.helpers import channel_stats, channels, eventually, lines, publish, tool_command


def test_prints_bodies_exactly_and_stops_after_n(nsqd, topic, start_tool):
    bodies = [b"plain", b"with spaces and \xc3\xa9", b"tab\there", b"  ", b"last"]
    publish(nsqd, topic, bodies)
    tail = start_tool("nsq_tail", f"--topic={topic}", f"--nsqd-tcp-address={nsqd.tcp_address}", "-n", "4",
                      "--channel=first")
    assert tail.wait(30) == 0, tail.stderr.decode()
    assert bytes(tail.stdout) == b"plain\nwith spaces and \xc3\xa9\ntab\there\n  \n"
    # the 4 shown are FINished; what arrived past -n went back to nsqd
    settled = eventually(lambda: (lambda s: s if s.get("in_flight_count") == 0 else None)(
        channel_stats(nsqd, topic, "first")))
    assert settled["depth"] == 1


def test_several_topics_with_print_topic_and_ephemeral_channel(nsqd, topic, start_tool):
    other = topic[:60] + "_b"
    tail = start_tool("nsq_tail", f"--topic={topic}", f"--topic={other}", f"--nsqd-tcp-address={nsqd.tcp_address}",
                      "--print-topic")
    eventually(lambda: tail.stderr.count(b"connected to") == 2)
    channel = eventually(lambda: next((c["channel_name"] for c in channels(nsqd, topic)), None))
    assert channel.startswith("tail") and channel.endswith("#ephemeral") and len(channel) == len("tail123456#ephemeral")
    publish(nsqd, topic, [b"a1", b"a2"])
    publish(nsqd, other, [b"b1"])
    eventually(lambda: len(lines(tail.stdout)) == 3)
    assert sorted(lines(tail.stdout)) == sorted([f"{topic} | a1".encode(), f"{topic} | a2".encode(),
                                                 f"{other} | b1".encode()])
    assert tail.stop() == 0
    assert b"Traceback" not in tail.stderr


def test_a_closed_pipe_ends_it_quietly(nsqd, topic):
    """The closed pipe is noticed by the next write, as with NSQ's nsq_tail:
    the lines outgrow a pipe's buffer (64 KiB), so some are still to be
    written when ``head`` has gone, however the two are scheduled."""
    padding = b" " + b"x" * 100
    publish(nsqd, topic, [b"line %d" % i + padding for i in range(5000)])
    tail = subprocess.Popen(tool_command("nsq_tail", f"--topic={topic}", f"--nsqd-tcp-address={nsqd.tcp_address}",
                                         "--channel=piped"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        head = subprocess.run(["head", "-n", "3"], stdin=tail.stdout, capture_output=True, timeout=30)
        tail.stdout.close()
        assert head.stdout == b"".join(b"line %d" % i + padding + b"\n" for i in range(3))
        assert tail.wait(30) == 0
        assert b"Traceback" not in tail.stderr.read()
    finally:
        tail.kill()
        tail.wait()
