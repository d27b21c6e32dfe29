"""Bounded queues on a real nsqd: a full ``reject`` queue refuses PUB, MPUB
(whole) and DPUB with the reason, HTTP with 503, and takes messages again
once gnsq (a client that knows nothing of limits) drains it; ``drop-oldest``
keeps the newest; limits count disk too and survive a restart."""

from nsqpy.protocol import commands as cmd
from tests.integration.nsqd_policies import channel_stats, consume, create
from tests.support.wire import WireConn, http, http_json


def test_a_full_channel_rejects_publishes_until_drained(start_nsqd, topic):
    nsqd = start_nsqd("--mem-queue-size=2")  # the limit counts what is on disk too
    create(nsqd, topic, "ch")
    assert http_json("POST", f"{nsqd.http_url}/channel/config?topic={topic}&channel=ch&max_depth=3")[1][
        "max_depth"] == 3
    reason = f"channel {topic}/ch is full (depth 3, max_depth 3)"
    with WireConn(nsqd.tcp_hostport) as producer:
        producer.identify()
        producer.send(cmd.mpub(topic, [b"m1", b"m2"]))
        producer.expect_ok()
        producer.send(cmd.mpub(topic, [b"m3", b"m4"]))  # one would fit: all or nothing
        error = producer.error()
        assert (error.code, str(error)) == ("E_MPUB_FAILED", f"E_MPUB_FAILED MPUB failed channel {topic}/ch is full "
                                                            "(depth 2, max_depth 3)")
    with WireConn(nsqd.tcp_hostport) as producer:
        producer.identify()
        producer.publish(topic, b"m3")
        producer.send(cmd.pub(topic, b"m4"))
        assert str(producer.error()) == f"E_PUB_FAILED PUB failed {reason}"
    with WireConn(nsqd.tcp_hostport) as producer:
        producer.identify()
        producer.send(cmd.dpub(topic, 100, b"m4"))
        assert str(producer.error()) == f"E_DPUB_FAILED DPUB failed {reason}"
    assert http_json("POST", f"{nsqd.http_url}/pub?topic={topic}", b"m4") == (503, {"message": f"QUEUE_FULL {reason}"})
    stats = channel_stats(nsqd, topic, "ch")
    assert (stats["depth"], stats["backend_depth"]) == (3, 1)

    assert sorted(consume(nsqd, topic, "ch", 3)) == ["m1", "m2", "m3"]
    assert http("POST", f"{nsqd.http_url}/pub?topic={topic}", b"m4")[0] == 200
    assert consume(nsqd, topic, "ch", 1) == ["m4"]


def test_a_topic_without_channels_rejects_at_its_own_limit(start_nsqd, topic):
    nsqd = start_nsqd("--max-depth=2")
    create(nsqd, topic)
    assert http("POST", f"{nsqd.http_url}/mpub?topic={topic}", b"a\nb")[0] == 200
    assert http_json("POST", f"{nsqd.http_url}/pub?topic={topic}", b"c") == (
        503, {"message": f"QUEUE_FULL topic {topic} is full (depth 2, max_depth 2)"})


def test_drop_oldest_keeps_the_newest(nsqd, topic):
    create(nsqd, topic, "ch")
    _, config = http_json("POST", f"{nsqd.http_url}/channel/config?topic={topic}&channel=ch&max_depth=3"
                                  "&full_policy=drop-oldest")
    assert (config["max_depth"], config["full_policy"]) == (3, "drop-oldest")
    for index in range(10):
        assert http("POST", f"{nsqd.http_url}/pub?topic={topic}", f"m{index}".encode())[0] == 200
    stats = channel_stats(nsqd, topic, "ch")
    assert (stats["depth"], stats["dropped_count"]) == (3, 7)
    assert consume(nsqd, topic, "ch", 3) == ["m7", "m8", "m9"]
    _, _, body = http("GET", f"{nsqd.http_url}/metrics")
    assert f'nsqd_channel_dropped_total{{topic="{topic}",channel="ch"}} 7\n'.encode() in body


def test_a_batch_larger_than_a_drop_oldest_limit_keeps_its_newest(start_nsqd, topic):
    """Never above max_depth after a publish: an MPUB bigger than the limit
    drops what was queued and then its own oldest messages, on disk as in
    memory, for a topic without channels and for a channel."""
    nsqd = start_nsqd("--mem-queue-size=40")
    create(nsqd, topic)
    assert http("POST", f"{nsqd.http_url}/topic/config?topic={topic}&max_depth=100&full_policy=drop-oldest")[0] == 200
    with WireConn(nsqd.tcp_hostport) as producer:
        producer.identify()
        producer.send(cmd.mpub(topic, [b"early"] * 10))
        producer.expect_ok()
        producer.send(cmd.mpub(topic, [b"t%03d" % i for i in range(150)]))
        producer.expect_ok()
    _, stats = http_json("GET", f"{nsqd.http_url}/stats?format=json&topic={topic}")
    assert (stats["topics"][0]["depth"], stats["topics"][0]["dropped_count"]) == (100, 60)

    assert http("POST", f"{nsqd.http_url}/topic/config?topic={topic}&max_depth=0")[0] == 200
    create(nsqd, topic, "ch")  # takes the topic's 100
    assert http("POST", f"{nsqd.http_url}/channel/config?topic={topic}&channel=ch&max_depth=100"
                        "&full_policy=drop-oldest")[0] == 200
    assert http("POST", f"{nsqd.http_url}/mpub?topic={topic}", b"\n".join(b"c%03d" % i for i in range(150)))[0] == 200
    stats = channel_stats(nsqd, topic, "ch")
    assert (stats["depth"], stats["dropped_count"]) == (100, 150)
    assert consume(nsqd, topic, "ch", 100) == [f"c{i:03d}" for i in range(50, 150)]


def test_limits_survive_a_restart(start_nsqd, tmp_path, topic):
    data_path = tmp_path / "kept"
    nsqd = start_nsqd(data_path=data_path)
    create(nsqd, topic, "ch")
    assert http("POST", f"{nsqd.http_url}/topic/config?topic={topic}&max_depth=100&full_policy=drop-oldest")[0] == 200
    assert http("POST", f"{nsqd.http_url}/channel/config?topic={topic}&channel=ch&max_depth=5")[0] == 200
    nsqd.stop()
    nsqd = start_nsqd(data_path=data_path)
    _, topic_config = http_json("GET", f"{nsqd.http_url}/topic/config?topic={topic}")
    assert (topic_config["max_depth"], topic_config["full_policy"]) == (100, "drop-oldest")
    _, channel_config = http_json("GET", f"{nsqd.http_url}/channel/config?topic={topic}&channel=ch")
    assert (channel_config["max_depth"], channel_config["full_policy"]) == (5, "reject")
