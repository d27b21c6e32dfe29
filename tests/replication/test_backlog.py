"""A replicated nsqd with a million-message backlog (two topics, two
channels each, mostly on disk): a survivor takes it over, and a new
successor gets its copy, in slices, every node answering /ping and
renewing its lease throughout."""

import re
import threading
import time

import pytest

from tests.replication.conftest import held_for
from tests.support.wire import WireConn, http, wait_until

pytestmark = pytest.mark.replication

BACKLOG = 1_000_000
MPUB_SIZE = 5000
CHANNELS = ("ch1", "ch2")


class Prober(threading.Thread):
    """/ping every 50 ms on each node: every answer and the longest wait for one."""

    def __init__(self, urls: list[str]):
        super().__init__(daemon=True)
        self.urls = urls
        self.failures: list[str] = []
        self.longest = 0.0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.05):
            for url in self.urls:
                began = time.monotonic()
                try:
                    status, _, body = http("GET", f"{url}/ping", timeout=10)
                except OSError as error:
                    status, body = 0, str(error).encode()
                self.longest = max(self.longest, time.monotonic() - began)
                if status != 200:
                    self.failures.append(f"{url}: {status} {body!r}")


def backlog_on_node_0(cluster, topic: str) -> list[str]:
    """BACKLOG messages published to node 0, half to each of two topics, and copied to node 1."""
    cluster.wait_connected()
    origin = cluster.nsqds[0]
    names = [f"{topic[:60]}_{suffix}" for suffix in "ab"]
    for name in names:
        for channel in CHANNELS:
            cluster.create_channel(name, channel)
    with WireConn(origin.tcp_hostport, timeout=120) as conn:
        for first in range(0, BACKLOG, MPUB_SIZE):
            name = names[first // MPUB_SIZE % 2]
            bodies = [b"m%d" % n for n in range(first, first + MPUB_SIZE)]
            conn.send(b"MPUB %s\n%s" % (name.encode(), _mpub_body(bodies)))
            conn.expect_ok()
    assert held_for(cluster, 1, origin) == [BACKLOG]
    return names


def test_a_million_message_backlog_is_taken_over_without_a_pause_that_costs_a_lease(replicated, topic):
    cluster = replicated()
    origin = cluster.nsqds[0]
    names = backlog_on_node_0(cluster, topic)
    prober = Prober([cluster.nsqds[1].http_url, cluster.nsqds[2].http_url])
    prober.start()
    try:
        origin.kill()
        wanted = {(name, channel): BACKLOG // 2 for name in names for channel in CHANNELS}
        survivor = wait_until(lambda: next((i for i in (1, 2) if _queued(cluster, i, names) == wanted), None),
                              timeout=600)
    finally:
        prober.stopping.set()
        prober.join(30)
    line = cluster.nsqds[survivor].wait_for_log(r"took over \S+ epoch \d+: \d+ messages")
    print(f"{line.split('REPLICATION: ')[-1]}; longest /ping answer {prober.longest * 1000:.0f} ms")
    assert re.search(rf"took over \S+ epoch \d+: {BACKLOG} messages delivered from here", line)
    assert prober.failures == []
    for index in (1, 2):
        assert "lease of epoch" not in cluster.nsqds[index].output, cluster.nsqds[index].output[-2000:]


def test_a_million_message_backlog_gets_a_new_copy_in_slices_when_its_peer_dies(replicated, topic):
    """Node 1 holds node 0's copies and dies: node 2, node 0's successor
    now, gets all of them while node 0 goes on answering and renewing its
    lease (of 2 s, renewed every 0.7 s: a copy made in one go would cost
    it); node 0 dying next loses nothing."""
    cluster = replicated(nsqd_args=("--replication-lease=2s",))
    origin = cluster.nsqds[0]
    names = backlog_on_node_0(cluster, topic)
    prober = Prober([origin.http_url, cluster.nsqds[2].http_url])
    prober.start()
    try:
        cluster.nsqds[1].kill()
        wait_until(lambda: held_for(cluster, 2, origin) == [BACKLOG], timeout=600)
    finally:
        prober.stopping.set()
        prober.join(30)
    print(origin.wait_for_log(r"copied \d+ held messages").split("REPLICATION: ")[-1],
          f"; longest /ping answer {prober.longest * 1000:.0f} ms")
    assert prober.failures == [], origin.output[-3000:]
    assert "lease of epoch" not in origin.output, origin.output[-3000:]
    origin.kill()
    wanted = {(name, channel): BACKLOG // 2 for name in names for channel in CHANNELS}
    wait_until(lambda: _queued(cluster, 2, names) == wanted, timeout=600)


def _mpub_body(bodies: list[bytes]) -> bytes:
    payload = len(bodies).to_bytes(4, "big") + b"".join(len(b).to_bytes(4, "big") + b for b in bodies)
    return len(payload).to_bytes(4, "big") + payload


def _queued(cluster, index: int, names: list[str]) -> dict[tuple[str, str], int]:
    return {(t["topic_name"], c["channel_name"]): c["depth"] + c["in_flight_count"] + c["deferred_count"]
            for t in cluster.stats(index)["topics"] if t["topic_name"] in names for c in t["channels"]}
