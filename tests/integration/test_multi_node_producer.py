"""A Producer over several nsqd: spreading, failover on kill -9 and SIGSTOP, replicas with dedup."""

import asyncio
import os
import re
import signal

import pytest

from nsqpy.client import Config, Consumer, NoNodeAvailableError, Producer, SyncProducer
from tests.integration.test_client import FAST, Collector, eventually, run
from tests.support.wire import http, http_json, wait_until

pytestmark = pytest.mark.filterwarnings("error::DeprecationWarning")  # the client is a library: no deprecated calls

DURABLE = ("--mem-queue-size=0", "--sync-every=1")


@pytest.fixture
def cluster(start_lookupd, start_nsqd):
    """nsqlookupd and three nsqd registered with it; ``start`` (re)starts node i."""
    lookupd = start_lookupd()

    class Cluster:
        def __init__(self):
            self.lookupd = lookupd
            self.nodes = []

        def start(self, i=None, *extra, address=None, data_path=None):
            flags = [f"--lookupd-tcp-address={lookupd.tcp_address}", *extra]
            if address:
                flags += [f"--tcp-address={address}"]
            daemon = start_nsqd(*flags, data_path=data_path)
            if i is None:
                self.nodes.append(daemon)
            else:
                self.nodes[i] = daemon
            return daemon

    return Cluster()


def topic_count(daemon, topic, field="message_count"):
    _, data = http_json("GET", f"{daemon.http_url}/stats?format=json&topic={topic}")
    return data["topics"][0][field] if data["topics"] else 0


def channel_depth(daemon, topic, channel):
    _, data = http_json("GET", f"{daemon.http_url}/stats?format=json&topic={topic}&channel={channel}")
    stats = data["topics"][0]["channels"][0]
    return stats["depth"] + stats["in_flight_count"] + stats["deferred_count"]


def create_channels(daemons, topic, *channels):
    for daemon in daemons:
        assert http("POST", f"{daemon.http_url}/topic/create?topic={topic}")[0] == 200
        for channel in channels:
            assert http("POST", f"{daemon.http_url}/channel/create?topic={topic}&channel={channel}")[0] == 200


async def consume(cluster, live, topic, channel, handler, count, **options):
    """Consume through nsqlookupd until ``handler`` has ``count`` messages and
    the ``live`` nodes hold nothing more for the channel."""
    consumer = Consumer(topic, channel, handler, config=Config(max_in_flight=200, **FAST), **options)
    await consumer.connect_to_nsqlookupd(cluster.lookupd.http_address)
    await handler.wait_for(count, timeout=60)
    await eventually(lambda: all(channel_depth(d, topic, channel) == 0 for d in live), timeout=60, interval=0.1)
    await consumer.stop()
    return consumer.stats()


def test_publishes_are_spread_over_every_node_found_through_lookupd(cluster, topic):
    for _ in range(3):
        cluster.start()
    wait_until(lambda: len(http_json("GET", f"{cluster.lookupd.http_url}/nodes")[1]["producers"]) == 3)

    async def main():
        async with Producer(lookupd_http_addresses=[cluster.lookupd.http_address]) as producer:
            for i in range(30):
                await producer.publish(topic, b"%d" % i)
            await producer.multi_publish(topic, [b"m1", b"m2"])
            await producer.deferred_publish(topic, 0.01, b"d")
            return producer.stats()

    stats = run(main())
    counts = [topic_count(daemon, topic) for daemon in cluster.nodes]
    assert sum(counts) == 32 + 1 and min(counts) >= 10  # round-robin: one publish each in turn
    assert sorted(stats) == sorted(daemon.tcp_address for daemon in cluster.nodes)
    assert sum(node.published for node in stats.values()) == 32


def test_the_two_copies_of_each_publish_spread_evenly_over_three_nodes(cluster, topic):
    for _ in range(3):
        cluster.start()

    async def main():
        async with Producer([d.tcp_address for d in cluster.nodes], replicas=2) as producer:
            for i in range(99):
                await producer.publish(topic, b"%d" % i)

    run(main())
    assert [topic_count(daemon, topic) for daemon in cluster.nodes] == [66, 66, 66]


@pytest.mark.parametrize("bad", ["bad topic", "two\nlines", "", "t" * 65, "a/b"])
def test_a_bad_topic_name_is_refused_before_anything_is_sent(cluster, topic, bad):
    """Not published to another topic ("bad topic" would land in "bad"),
    nor read by nsqd as a body size: one error naming the value."""
    node = cluster.start()
    with SyncProducer(node.tcp_address) as producer:
        for publish in (lambda: producer.publish(bad, b"x"), lambda: producer.multi_publish(bad, [b"x"]),
                        lambda: producer.deferred_publish(bad, 1, b"x")):
            with pytest.raises(ValueError, match=f"invalid topic name {re.escape(repr(bad))}: 1-64 characters"):
                publish()
    assert http_json("GET", f"{node.http_url}/stats?format=json")[1]["topics"] == []


@pytest.mark.parametrize("address, reason", [
    ("127.0.0.1", "nsqd address '127.0.0.1' is not host:port (e.g. 127.0.0.1:4150)"),
    ("127.0.0.1:99999", "nsqd address '127.0.0.1:99999': port 99999 is out of range (0-65535) (e.g. 127.0.0.1:4150)"),
])
def test_an_nsqd_address_without_a_port_is_refused_in_one_exception(address, reason):
    for make in (lambda: Producer(address), lambda: SyncProducer([address, "127.0.0.1:4150"])):
        with pytest.raises(ValueError) as refused:
            make()
        assert str(refused.value) == reason


def test_kill_9_of_a_node_under_steady_publishing_reaches_no_caller(cluster, topic, tmp_path):
    """Durable nodes, so that what the killed one acknowledged comes back with it."""
    for i in range(3):
        cluster.start(None, *DURABLE, data_path=tmp_path / f"node{i}")
    victim = cluster.nodes[1]
    victim_address = victim.tcp_address
    create_channels(cluster.nodes, topic, "ch")

    async def main():
        acknowledged = []
        producer = Producer([d.tcp_address for d in cluster.nodes], timeout=10, node_timeout=2)
        for i in range(600):
            body = b"%d" % i
            await producer.publish(topic, body)  # never raises: another node takes it
            acknowledged.append(body)
            if i == 200:
                victim.kill()
        assert not producer.stats()[victim_address].up
        restarted = await asyncio.to_thread(cluster.start, 1, *DURABLE, address=victim_address,
                                            data_path=tmp_path / "node1")
        await eventually(lambda: producer.stats()[victim_address].up, timeout=60)
        before = producer.stats()[victim_address].published
        for i in range(600, 630):
            await producer.publish(topic, b"%d" % i)
            acknowledged.append(b"%d" % i)
        assert producer.stats()[victim_address].published > before  # used again
        await producer.close()
        handler = Collector()
        await consume(cluster, cluster.nodes, topic, "ch", handler, len(acknowledged))
        return acknowledged, handler, restarted

    acknowledged, handler, restarted = run(main(), timeout=180)
    assert set(handler.bodies) == set(acknowledged)  # every acknowledged message
    # once, but for the publish in flight at the kill, which the victim may have stored unanswered
    assert len(handler.bodies) - len(acknowledged) <= 1
    assert topic_count(restarted, topic) > 0


def test_a_frozen_node_is_left_behind_within_the_node_timeout(cluster, topic):
    for _ in range(3):
        cluster.start()
    frozen = cluster.nodes[0]
    os.kill(frozen.process.pid, signal.SIGSTOP)
    try:
        async def main():
            # 2 s: a healthy node answers in time however busy the machine (else it too would be left behind)
            async with Producer([d.tcp_address for d in cluster.nodes], timeout=10, node_timeout=2) as producer:
                for i in range(40):
                    await producer.publish(topic, b"%d" % i)
                return producer.stats()

        stats = run(main())
    finally:
        os.kill(frozen.process.pid, signal.SIGCONT)
    assert not stats[frozen.tcp_address].up and "did not answer" in stats[frozen.tcp_address].last_error
    assert sum(topic_count(daemon, topic) for daemon in cluster.nodes[1:]) == 40


def test_no_node_left_is_reported_after_the_timeout_naming_each_node(cluster, topic):
    first, second = cluster.start(), cluster.start()
    addresses = [first.tcp_address, second.tcp_address]
    first.kill()
    second.kill()

    with SyncProducer(addresses, timeout=1.5) as producer:
        with pytest.raises(NoNodeAvailableError) as error:
            producer.publish(topic, b"lost?")
    message = str(error.value)
    assert "within 1.5s" in message and all(address in message for address in addresses)


def test_replicas_survive_a_kill_and_the_consumer_drops_the_copies(cluster, topic):
    for _ in range(3):
        cluster.start()
    create_channels(cluster.nodes, topic, "dedup", "raw")
    victim = cluster.nodes[2]

    async def main():
        acknowledged = []
        async with Producer([d.tcp_address for d in cluster.nodes], replicas=2, node_timeout=2) as producer:
            for i in range(300):
                await producer.publish(topic, b"%d" % i)
                acknowledged.append(b"%d" % i)
                if i == 100:
                    victim.kill()  # what it held in memory is gone; the other copy of each remains
        survivors = cluster.nodes[:2]
        held = sum(channel_depth(d, topic, "dedup") for d in survivors)
        deduped = Collector()
        stats = await consume(cluster, survivors, topic, "dedup", deduped, len(acknowledged), dedup=True)
        raw = Collector()
        await consume(cluster, survivors, topic, "raw", raw, held)
        return acknowledged, held, deduped, stats, raw

    acknowledged, held, deduped, stats, raw = run(main(), timeout=180)
    assert sorted(deduped.bodies) == sorted(acknowledged)  # every acknowledged message exactly once
    assert stats.copies_dropped == held - len(acknowledged) > 0
    assert len(raw.bodies) == held  # without dedup: every surviving copy, key line first
    assert all(body.count(b":") == 2 and b"\n" in body for body in raw.bodies)


def test_a_quorum_of_one_answers_when_one_replica_cannot_be_placed(cluster, topic):
    first, second = cluster.start(), cluster.start()
    second.kill()

    async def main():
        async with Producer([first.tcp_address, second.tcp_address], replicas=2, quorum=1,
                            timeout=10, node_timeout=3) as producer:
            await producer.publish(topic, b"one copy is enough")
        async with Producer([first.tcp_address, second.tcp_address], replicas=2, timeout=1) as strict:
            with pytest.raises(NoNodeAvailableError):
                await strict.publish(topic, b"two copies needed")

    run(main())
    assert topic_count(first, topic) >= 1
