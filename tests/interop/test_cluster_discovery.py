"""A cluster on loopback: 3 nsqd registered with 2 nsqlookupd. Third-party
consumers given only the lookupd addresses find every nsqd; lookupd follows
nodes that die, hang, restart or delete a topic."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nsqpy.localcluster import nsqd_process, nsqlookupd_process
from tests.support.wire import http, http_json, wait_until

PEERS = Path(__file__).parent / "peers"


class Cluster:
    def __init__(self, stack, tmp_path, nsqd_count=3, lookupd_count=2, lookupd_args=()):
        self.lookupds = [stack.enter_context(nsqlookupd_process(*lookupd_args)) for _ in range(lookupd_count)]
        flags = [f"--lookupd-tcp-address={l.tcp_address}" for l in self.lookupds]
        self.nsqds = []
        for i in range(nsqd_count):
            (tmp_path / f"n{i}").mkdir()
            self.nsqds.append(stack.enter_context(nsqd_process(str(tmp_path / f"n{i}"), *flags)))

    def producers(self, lookupd, topic) -> set[int]:
        status, data = http_json("GET", f"{lookupd.http_url}/lookup?topic={topic}")
        return {p["tcp_port"] for p in data["producers"]} if status == 200 else set()

    def wait_registered(self, topic, nsqds, timeout=30):
        ports = {n.tcp_hostport[1] for n in nsqds}
        for lookupd in self.lookupds:
            wait_until(lambda: self.producers(lookupd, topic) == ports, timeout=timeout)


@pytest.fixture
def cluster(tmp_path):
    import contextlib
    with contextlib.ExitStack() as stack:
        yield lambda **kw: Cluster(stack, tmp_path, **kw)


def consume(peer: str, topic: str, channel: str, count: int, lookupds) -> list[str]:
    urls = [f"http://{l.http_address}" for l in lookupds]
    result = subprocess.run([sys.executable, str(PEERS / f"{peer}_lookupd_peer.py"), topic, channel, str(count),
                             *urls], capture_output=True, text=True, timeout=90, cwd=PEERS)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


@pytest.mark.interop
def test_consumers_discover_every_nsqd_through_lookupd(cluster):
    c = cluster()
    topic = "spread"
    expected = []
    for i, nsqd in enumerate(c.nsqds):
        for channel in ("pynsq", "gnsq"):  # both channels exist before anything is published
            assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
            assert http("POST", f"{nsqd.http_url}/channel/create?topic={topic}&channel={channel}")[0] == 200
        bodies = [f"n{i}-{j}" for j in range(20)]
        assert http("POST", f"{nsqd.http_url}/mpub?topic={topic}", "\n".join(bodies).encode())[0] == 200
        expected += bodies
    c.wait_registered(topic, c.nsqds)
    assert consume("pynsq", topic, "pynsq", len(expected), c.lookupds) == sorted(expected)
    assert consume("gnsq", topic, "gnsq", len(expected), c.lookupds) == sorted(expected)


def test_lookupd_follows_deletes_kills_and_its_own_restart(cluster):
    c = cluster()
    topic = "followed"
    for nsqd in c.nsqds:
        assert http("POST", f"{nsqd.http_url}/pub?topic={topic}", b"x")[0] == 200
    c.wait_registered(topic, c.nsqds)

    # a topic deleted on one nsqd: that nsqd leaves /lookup at once, on every lookupd
    assert http("POST", f"{c.nsqds[1].http_url}/topic/delete?topic={topic}")[0] == 200
    c.wait_registered(topic, [c.nsqds[0], c.nsqds[2]], timeout=10)  # not the 5 min inactivity timeout

    # a killed nsqd: its connections close and lookupd drops it
    c.nsqds[2].kill()
    c.wait_registered(topic, [c.nsqds[0]], timeout=10)

    # a restarted lookupd, on the same address, is repopulated by the nsqd still alive
    old = c.lookupds[0]
    address = old.tcp_address
    old.kill()
    replacement = nsqlookupd_process(f"--tcp-address={address}").start()
    try:
        c.lookupds[0] = replacement
        c.wait_registered(topic, [c.nsqds[0]], timeout=30)
    finally:
        replacement.stop()


def test_a_hung_nsqd_leaves_lookup_after_the_inactivity_timeout(cluster):
    # nsqd PINGs every 15 s, so the timeout must be longer than that
    c = cluster(nsqd_count=2, lookupd_count=1, lookupd_args=("--inactive-producer-timeout=18s",))
    topic = "hung"
    for nsqd in c.nsqds:
        assert http("POST", f"{nsqd.http_url}/pub?topic={topic}", b"x")[0] == 200
    c.wait_registered(topic, c.nsqds)
    hung = c.nsqds[1]
    hung.process.send_signal(signal.SIGSTOP)  # its TCP connection stays open, it just stops talking
    try:
        c.wait_registered(topic, [c.nsqds[0]], timeout=45)
    finally:
        hung.process.send_signal(signal.SIGCONT)


def test_a_new_topic_gets_the_channels_lookupd_knows_before_its_first_message(cluster):
    c = cluster(nsqd_count=2, lookupd_count=1)
    first, second = c.nsqds
    topic = "precreated"
    assert http("POST", f"{first.http_url}/topic/create?topic={topic}")[0] == 200
    assert http("POST", f"{first.http_url}/channel/create?topic={topic}&channel=archive")[0] == 200
    wait_until(lambda: http_json("GET", f"{c.lookupds[0].http_url}/channels?topic={topic}")[1]["channels"]
               == ["archive"])
    wait_until(lambda: "LOOKUPD(" in second.output and "peer info" in second.output)
    assert http("POST", f"{second.http_url}/pub?topic={topic}", b"first")[0] == 200
    _, stats = http_json("GET", f"{second.http_url}/stats?format=json&topic={topic}")
    (t,) = stats["topics"]

    def archive_depth():
        _, s = http_json("GET", f"{second.http_url}/stats?format=json&topic={topic}")
        channels = s["topics"][0]["channels"]
        return channels and channels[0]["channel_name"] == "archive" and channels[0]["depth"] == 1

    wait_until(archive_depth, timeout=15)
