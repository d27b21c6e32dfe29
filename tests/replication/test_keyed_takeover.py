"""Keyed publishes in a replicated cluster: the keys travel with the copies,
so the survivor that takes a killed nsqd over recognises a repeat of
what that node acknowledged, delivered or not."""

import time

import pytest

from nsqpy.protocol import keyed
from tests.replication.conftest import LOOKS
from tests.support.wire import WireConn, wait_until

pytestmark = pytest.mark.replication

KEYS = 100
FINISHED_BEFORE_THE_KILL = 40


def kpub_all(daemon, topic: str, bodies: dict[bytes, bytes]) -> None:
    with WireConn(daemon.tcp_hostport) as conn:
        for key, body in bodies.items():
            conn.send(keyed.kpub(topic, key, body))
            conn.expect_ok()


def test_a_survivor_recognises_the_keys_of_the_node_it_took_over(replicated, topic):
    cluster = replicated()
    cluster.wait_connected()
    time.sleep(LOOKS)
    cluster.create_channel(topic, "ch")
    origin = cluster.nsqds[1]
    kpub_all(origin, topic, {b"k%d" % n: b"m%d" % n for n in range(KEYS)})
    with WireConn(origin.tcp_hostport) as conn:
        conn.subscribe(topic, "ch", rdy=FINISHED_BEFORE_THE_KILL)
        finished = set()
        for message in conn.messages(FINISHED_BEFORE_THE_KILL):
            conn.send(b"FIN " + message.id + b"\n")
            finished.add(message.body)
        conn.answers_handled()
    origin.kill()

    def taken_over():
        return sum(cluster.stats(i)["replication"]["takeovers"] for i in (0, 2)) == 1
    wait_until(taken_over, timeout=60)
    survivor = next(cluster.nsqds[i] for i in (0, 2) if cluster.stats(i)["replication"]["takeovers"])
    kpub_all(survivor, topic, {b"k%d" % n: b"repeat %d" % n for n in range(KEYS + 10)})
    with WireConn(survivor.tcp_hostport) as conn:
        conn.subscribe(topic, "ch", rdy=200)
        bodies = conn.drain(quiet=3)
    not_finished = [b"m%d" % n for n in range(KEYS) if b"m%d" % n not in finished]
    assert sorted(bodies) == sorted(not_finished + [b"repeat %d" % n for n in range(KEYS, KEYS + 10)])
