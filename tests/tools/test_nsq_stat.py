"""nsq_stat: NSQ's columns, summed over every nsqd of the topic (found through nsqlookupd)."""

import re
import subprocess

from tests.support.wire import http_json, wait_until
from tests.tools.helpers import create_channel, publish, run_tool, tool_command

ROW = re.compile(r"^\s*(-?\d+)\s+(-?\d+) \|\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+) \|\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$")
COLUMNS = ["ingress", "egress", "total", "mem", "disk", "inflt", "def", "req", "t-o", "msgs", "clients"]


def test_columns_summed_over_the_topics_nsqd(start_lookupd, start_nsqd, topic):
    lookupd = start_lookupd()
    nodes = [start_nsqd(f"--lookupd-tcp-address={lookupd.tcp_address}"),
             start_nsqd(f"--lookupd-tcp-address={lookupd.tcp_address}", "--mem-queue-size=2")]
    for node, count in zip(nodes, (3, 5)):
        create_channel(node, topic, "stat")
        publish(node, topic, [b"m"] * count)
    wait_until(lambda: len(http_json("GET", f"{lookupd.http_url}/lookup?topic={topic}")[1].get("producers") or []) == 2,
               30)
    result = run_tool("nsq_stat", f"--topic={topic}", "--channel=stat", f"--lookupd-http-address={lookupd.http_address}",
                      "--interval=100ms", "--count=3")
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode().splitlines()
    assert out[0] == "------rate------+----------------depth----------------+--------------metadata---------------"
    assert out[1].split() == ["ingress", "egress", "|", "total", "mem", "disk", "inflt", "def", "|", "req", "t-o",
                              "msgs", "clients"]
    rows = [dict(zip(COLUMNS, map(int, ROW.match(line).groups()))) for line in out[2:]]
    assert len(rows) == 3
    for row in rows:
        assert row == {"ingress": 0, "egress": 0, "total": 8, "mem": 5, "disk": 3, "inflt": 0, "def": 0, "req": 0,
                       "t-o": 0, "msgs": 8, "clients": 0}


def test_header_every_25_reports_and_rates(nsqd, topic):
    create_channel(nsqd, topic, "stat")
    result = run_tool("nsq_stat", f"--topic={topic}", "--channel=stat", f"--nsqd-http-address={nsqd.http_address}",
                      "--interval=10ms", "--count=52")
    out = result.stdout.decode().splitlines()
    headers = [i for i, line in enumerate(out) if line.startswith("------rate")]
    assert headers == [0, 26, 53] and len(out) == 52 + 2 * 3


def test_missing_channel_is_one_line(nsqd, topic):
    publish(nsqd, topic, [b"m"])
    result = run_tool("nsq_stat", f"--topic={topic}", "--channel=none", f"--nsqd-http-address={nsqd.http_address}",
                      "--count=1")
    assert result.returncode == 1
    assert result.stderr.decode() == f"nsq_stat: failed to find channel(none) in stats metadata for topic({topic})\n"


def test_a_closed_pipe_ends_it_quietly(nsqd, topic):
    create_channel(nsqd, topic, "stat")
    stat = subprocess.Popen(tool_command("nsq_stat", f"--topic={topic}", "--channel=stat",
                                         f"--nsqd-http-address={nsqd.http_address}", "--interval=10ms"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        head = subprocess.run(["head", "-n", "3"], stdin=stat.stdout, capture_output=True, timeout=30)
        stat.stdout.close()
        assert len(head.stdout.splitlines()) == 3
        assert stat.wait(30) == 0
        assert stat.stderr.read() == b""
    finally:
        stat.kill()
        stat.wait()
