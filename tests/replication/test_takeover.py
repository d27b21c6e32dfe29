"""Replicated nsqd (R=2) with a real etcd, driven by third-party clients
that know nothing of it: gnsq publishes spread over three nsqd, a gnsq
consumer finds them through nsqlookupd. When one nsqd dies, a survivor
delivers what it had acknowledged and not seen finished; when it comes
back, nothing taken over is delivered again."""

import json
import signal
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from nsqpy.protocol import commands
from tests.replication.conftest import acknowledged, held_for, mpub
from tests.support.wire import WireConn, http, wait_until

pytestmark = pytest.mark.replication

# a takeover waits for the dead node's lease (3s) and the next look at the
# members; consumers find a topic new to a survivor at their next lookupd poll
TAKEOVER_WINDOW = 60


def metric(daemon, name: str) -> float:
    _, _, body = http("GET", f"{daemon.http_url}/metrics")
    return next(sample.value for family in text_string_to_metric_families(body.decode())
                for sample in family.samples if sample.name == name)


def report(name: str, acked: set[str], handled) -> str:
    duplicated = sum(count - 1 for body, count in handled.items() if body in acked and count > 1)
    return (f"{name}: acknowledged {len(acked)}, handled {len(acked & set(handled))}, "
            f"lost {len(acked - set(handled))}, duplicated {duplicated}")


def streaming(replicated, topic: str, count: int, acked_first: int):
    """Three nsqd (R=2), a gnsq consumer on channel ``ch`` through
    nsqlookupd, and gnsq publishing ``count`` messages spread over them,
    ``acked_first`` of them acknowledged already."""
    cluster = replicated()
    cluster.wait_connected()
    cluster.create_channel(topic, "ch")
    reader = cluster.reader(topic, "ch")
    publisher = cluster.publisher(topic, count)
    publisher.wait_for(rf"acked {acked_first}", timeout=120)
    return cluster, reader, publisher


@pytest.mark.parametrize("machine_gone", [False, True], ids=["kill-9", "kill-9-and-data-dir-deleted"])
def test_a_killed_nsqd_is_taken_over_and_comes_back_without_redelivering(replicated, topic, machine_gone):
    cluster, reader, publisher = streaming(replicated, topic, 50_000, 15000)
    cluster.nsqds[1].kill()
    acked = acknowledged(publisher)
    reader.wait_for(acked, timeout=TAKEOVER_WINDOW)
    took_over = [cluster.stats(i)["replication"]["takeovers"] for i in (0, 2)]
    assert sum(took_over) == 1, took_over
    survivor = cluster.nsqds[0 if took_over[0] else 2]
    assert metric(survivor, "nsqd_replication_takeovers_total") == 1
    assert metric(survivor, "nsqd_replication_adopted_messages_total") > 0
    print(report("kill -9" + (" and data dir deleted" if machine_gone else ""), acked, reader.handled()))

    handled_before = sum(reader.handled().values())
    cluster.start(1, empty=machine_gone)
    cluster.wait_connected()
    restarted = cluster.stats(1)
    assert sum(c["depth"] + c["in_flight_count"] for t in restarted["topics"] for c in t["channels"]) == 0
    time.sleep(3)  # the consumer has found the restarted node again by now (1s lookupd polls)
    assert sum(reader.handled().values()) == handled_before, "something taken over was delivered again"
    # and it rejoins as a replica: its own publishes are copied again
    assert http("POST", f"{cluster.nsqds[1].http_url}/pub?topic={topic}", b"m-after")[0] == 200
    assert cluster.stats(1)["replication"]["under_replicated_messages"] == 0


def test_copies_held_by_old_and_new_successors_are_taken_over_once(replicated, topic):
    """Node 0 copies to node 2, its successor; node 1 joins between them,
    gets a copy of what node 0 holds and the copies from then on. When node
    0 dies, the peer that loses the etcd race hands its copies to the one
    that won, which adopts only what it lacks: each message is delivered once."""
    cluster = replicated(started=(0, 2))
    cluster.wait_connected()
    origin = cluster.nsqds[0]
    assert http("POST", f"{origin.http_url}/topic/create?topic={topic}")[0] == 200
    assert http("POST", f"{origin.http_url}/channel/create?topic={topic}&channel=ch")[0] == 200
    first = [b"m%d" % n for n in range(100)]
    assert http("POST", f"{origin.http_url}/mpub?topic={topic}", b"\n".join(first))[0] == 200
    cluster.start(1)
    cluster.wait_connected()
    second = [b"m%d" % n for n in range(100, 200)]
    assert http("POST", f"{origin.http_url}/mpub?topic={topic}", b"\n".join(second))[0] == 200
    assert held_for(cluster, 1, origin) == [200] and held_for(cluster, 2, origin) == [100]
    origin.kill()  # before any consumer: nothing was delivered there
    reader = cluster.reader(topic, "ch")
    reader.wait_for({f"m{n}" for n in range(200)}, timeout=TAKEOVER_WINDOW)
    wait_until(lambda: not held_for(cluster, 1, origin) and not held_for(cluster, 2, origin), timeout=30)
    assert sum(cluster.stats(i)["replication"]["takeovers"] for i in (1, 2)) == 1
    time.sleep(2)  # a late hand-over would be delivered by now
    assert sum(reader.handled().values()) == 200


def test_a_nodes_messages_get_a_new_copy_when_its_peer_dies(replicated, topic):
    """Node 0 copies to node 1. Node 1 dies: node 0's successor is node 2
    now, and gets what node 0 still holds (memory and disk: 10 in memory
    per queue), so node 0 dying next loses nothing either."""
    cluster = replicated(nsqd_args=("--mem-queue-size=10",))
    cluster.wait_connected()
    origin = cluster.nsqds[0]
    cluster.create_channel(topic, "ch")
    sent = mpub(origin, topic, range(100))
    assert held_for(cluster, 1, origin) == [100]
    cluster.nsqds[1].kill()
    wait_until(lambda: held_for(cluster, 2, origin) == [100], timeout=30)
    origin.kill()
    reader = cluster.reader(topic, "ch")
    reader.wait_for(sent, timeout=TAKEOVER_WINDOW)


def test_a_clean_restart_keeps_its_messages_and_copies_them_again(replicated, topic):
    cluster = replicated(nsqd_args=("--mem-queue-size=10",))
    cluster.wait_connected()
    origin = cluster.nsqds[0]
    cluster.create_channel(topic, "ch")
    sent = mpub(origin, topic, range(100))
    assert origin.stop() == 0
    origin = cluster.start(0)
    assert "dropped" not in origin.output
    # the copies of the new epoch: node 1 may not have dropped those of the old one yet
    epoch = cluster.stats(0)["replication"]["epoch"]
    wait_until(lambda: held_for(cluster, 1, origin, epoch) == [100], timeout=30)
    origin.kill()
    reader = cluster.reader(topic, "ch")
    reader.wait_for(sent, timeout=TAKEOVER_WINDOW)
    assert sum(reader.handled().values()) == len(sent), "the stopped node's own copies were taken over too"


def test_with_ack_on_disk_a_peer_restarted_after_a_crash_takes_over_what_it_held(replicated, topic):
    """--replication-ack=disk: node 0 and the peer holding its copies (node
    1) die at once; node 1 comes back with its disk and delivers node 0's
    acknowledged messages (held in memory only, they would be gone)."""
    cluster = replicated(nsqd_args=("--replication-ack=disk",))
    cluster.wait_connected()
    origin, peer = cluster.nsqds[0], cluster.nsqds[1]
    cluster.create_channel(topic, "ch")
    sent = mpub(origin, topic, range(100))
    assert http("POST", f"{origin.http_url}/pub?topic={topic}", b"m100")[0] == 200
    sent.add("m100")
    origin.process.kill()
    peer.process.kill()
    origin.process.wait(10)
    peer.process.wait(10)
    restarted = cluster.start(1)
    restarted.wait_for_log(r"101 copies of \S+ epoch \d+ read back from disk", timeout=10)
    reader = cluster.reader(topic, "ch")
    reader.wait_for(sent, timeout=TAKEOVER_WINDOW)
    assert cluster.stats(1)["replication"]["takeovers"] == 1


def test_a_channel_paused_at_the_dead_node_is_paused_where_it_is_taken_over(replicated, topic):
    cluster = replicated()
    cluster.wait_connected()
    origin = cluster.nsqds[0]
    assert http("POST", f"{origin.http_url}/topic/create?topic={topic}")[0] == 200
    assert http("POST", f"{origin.http_url}/channel/create?topic={topic}&channel=ch")[0] == 200
    assert http("POST", f"{origin.http_url}/channel/pause?topic={topic}&channel=ch")[0] == 200
    mpub(origin, topic, range(10))
    origin.kill()

    def adopted():
        for index in (1, 2):
            for t in cluster.stats(index)["topics"]:
                if t["topic_name"] == topic and t["channels"] and t["channels"][0]["depth"] == 10:
                    return t["channels"][0]
    channel = wait_until(adopted, timeout=TAKEOVER_WINDOW)
    assert channel["paused"] is True


def test_a_frozen_nsqd_past_its_lease_loses_nothing(replicated, topic):
    cluster, reader, publisher = streaming(replicated, topic, 20_000, 5000)
    frozen = cluster.nsqds[2].process
    frozen.send_signal(signal.SIGSTOP)
    try:
        time.sleep(6)  # twice the lease
    finally:
        frozen.send_signal(signal.SIGCONT)
    acked = acknowledged(publisher)
    reader.wait_for(acked, timeout=TAKEOVER_WINDOW)
    cluster.nsqds[2].wait_for_log("took it over: handed|nobody took it over", timeout=30)
    print(report("SIGSTOP for twice the lease", acked, reader.handled()))


def test_while_etcd_is_down_no_node_acknowledges_past_its_lease_and_nothing_is_lost(replicated, topic):
    """No node can tell etcd down from etcd cut off from it alone: past
    its lease's deadline each refuses publishes (and delivers nothing),
    and takes them again once etcd answers, with no takeover."""
    cluster, reader, publisher = streaming(replicated, topic, 20_000, 5000)
    cluster.etcd.stop()
    wait_until(lambda: all(cluster.stats(i)["replication"]["fenced"] for i in range(3)), timeout=30)
    for daemon in cluster.nsqds:
        status, _, body = http("POST", f"{daemon.http_url}/pub?topic={topic}", b"refused")
        assert (status, json.loads(body)["message"]) == (
            503, "PUB_FAILED replication: this node's lease could not be renewed in time (etcd not reached)")
    cluster.etcd.start()
    wait_until(lambda: all(not cluster.stats(i)["replication"]["fenced"] for i in range(3)), timeout=30)
    cluster.nsqds[0].wait_for_log("REPLICATION: etcd answers again")
    acked = acknowledged(publisher)
    reader.wait_for(acked, timeout=TAKEOVER_WINDOW)
    assert all(cluster.stats(i)["replication"]["takeovers"] == 0 for i in range(3))
    assert all(cluster.stats(i)["replication"]["under_replicated_messages"] == 0 for i in range(3))
    print(report("etcd stopped and restarted", acked, reader.handled()))


def two_topics_published(cluster, topic: str) -> tuple[list[str], set[str]]:
    """Two topics with channels ch1 and ch2, and 2,000 messages MPUBbed to
    each on node 0 (the same ids in both) -> (the topics, the bodies)."""
    cluster.wait_connected()
    topics = [f"{topic[:60]}_{suffix}" for suffix in "ab"]
    for name in topics:
        for channel in ("ch1", "ch2"):
            cluster.create_channel(name, channel)
    sent: set[str] = set()
    for first in range(0, 2000, 100):
        for name in topics:
            sent |= mpub(cluster.nsqds[0], name, range(first, first + 100))
    return topics, sent


def test_two_topics_with_the_same_ids_are_both_taken_over_whole(replicated, topic):
    """Message ids are unique per topic only (as in NSQ): the two topics
    of one origin share them, and a takeover adopts every message of
    each, for each of their channels."""
    cluster = replicated()
    origin = cluster.nsqds[0]
    topics, sent = two_topics_published(cluster, topic)
    origin.kill()
    readers = [cluster.reader(name, channel) for name in topics for channel in ("ch1", "ch2")]
    for reader in readers:
        reader.wait_for(sent, timeout=TAKEOVER_WINDOW)
    time.sleep(2)  # a late hand-over would be delivered by now
    assert [sum(reader.handled().values()) for reader in readers] == [len(sent)] * 4


def test_copies_past_memory_are_held_on_disk_and_taken_over_whole(replicated, topic):
    """--mem-queue-size=100: the peer keeps the bodies past 100 copies per
    topic on disk, as the origin keeps its queues; 500 finished on one
    channel leave that channel's copies, and a takeover delivers the rest
    of every channel, bodies and all, once."""
    cluster = replicated(nsqd_args=("--mem-queue-size=100",))
    origin = cluster.nsqds[0]
    topics, sent = two_topics_published(cluster, topic)
    with WireConn(origin.tcp_hostport) as conn:
        conn.subscribe(topics[0], "ch1", rdy=500)
        finished = conn.messages(500)
        conn.send(commands.rdy(0))
        for message in finished:
            conn.send(commands.fin(message.id))

        def finished_and_told():  # the FINs are in, and every batch since has the peers' OK
            stats = cluster.stats(0)
            channel = next(c for t in stats["topics"] if t["topic_name"] == topics[0]
                           for c in t["channels"] if c["channel_name"] == "ch1")
            return channel["in_flight_count"] == 0 and all(p["lag_ms"] == 0 for p in stats["replication"]["peers"])
        wait_until(finished_and_told, timeout=30)
    peer = next(shadow for shadow in cluster.stats(1)["replication"]["shadows"]
                if shadow["origin"] == origin.tcp_address)
    assert peer["messages"] == 4000 and peer["spilled_bytes"] > 3000 * len(b"m1999")
    origin.kill()
    readers = {(name, channel): cluster.reader(name, channel) for name in topics for channel in ("ch1", "ch2")}
    rest = sent - {message.body.decode() for message in finished}
    for key, reader in readers.items():
        reader.wait_for(rest if key == (topics[0], "ch1") else sent, timeout=TAKEOVER_WINDOW)
    time.sleep(2)  # a late hand-over would be delivered by now
    assert [sum(reader.handled().values()) for reader in readers.values()] == [len(rest)] + [len(sent)] * 3


def test_a_clean_stop_keeps_the_copies_it_holds_for_others(replicated, topic):
    """The origin dies and the only peer holding its copies is stopped
    cleanly before any takeover: the peer keeps them in its data dir as it
    keeps its own messages, and takes them over once it is back."""
    cluster = replicated()
    cluster.wait_connected()
    origin, peer = cluster.nsqds[0], cluster.nsqds[1]
    names = [f"{topic[:60]}_{suffix}" for suffix in "ab"]
    for name in names:
        for channel in ("ch1", "ch2"):
            cluster.create_channel(name, channel)
    sent = mpub(origin, names[0], range(100)) | mpub(origin, names[1], range(100, 200))
    assert held_for(cluster, 1, origin) == [200]
    origin.kill()
    assert peer.stop() == 0  # within the origin's lease: nobody has taken it over yet
    assert "kept 200 copies of" in peer.output
    assert sum(held_for(cluster, 2, origin)) == 0, "node 2 holds copies: the test would prove nothing"
    cluster.start(1)
    readers = {(name, channel): cluster.reader(name, channel) for name in names for channel in ("ch1", "ch2")}
    for (name, _), reader in readers.items():
        reader.wait_for({body for body in sent if (int(body[1:]) < 100) == (name == names[0])},
                        timeout=TAKEOVER_WINDOW)


def test_an_origin_killed_with_its_only_replica_is_named_loudly(replicated, topic):
    """R=2, and the origin dies together with the peer holding its copies:
    nothing can save those messages, but the survivor says so in one line
    and counts it per origin, instead of a bare 'lost peer'."""
    cluster = replicated()
    cluster.wait_connected()
    origin, replica = cluster.nsqds[0], cluster.nsqds[1]
    names = [f"{topic[:60]}_{suffix}" for suffix in "ab"]
    for name in names:
        cluster.create_channel(name, "ch")
        mpub(origin, name, range(100))
    assert held_for(cluster, 1, origin) == [200]
    epoch = cluster.stats(0)["replication"]["epoch"]
    origin.process.kill()
    replica.process.kill()
    survivor = cluster.nsqds[2]
    survivor.wait_for_log(rf"{origin.tcp_address} epoch {epoch} left the cluster together with "
                          rf"{replica.tcp_address}, every peer that held its copies", timeout=TAKEOVER_WINDOW)
    _, _, body = http("GET", f"{survivor.http_url}/metrics")
    assert f'nsqd_replication_lost_epochs_total{{origin="{origin.tcp_address}"}} 1.0' in body.decode()
    assert cluster.stats(2)["replication"]["lost_epochs"] == [{"origin": origin.tcp_address, "epochs": 1}]
