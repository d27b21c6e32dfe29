"""/topic/empty of a paused retained topic in durable mode, whose channels
read its log through cursors: what the topic held back from them is
dropped, as NSQ's empty drops a paused topic's queue; what each channel
had been given before the pause stays its own, through kill -9."""

import pytest

from tests.support.wire import WireConn, http, http_json, wait_until

DURABLE = ("--mem-queue-size=0", "--sync-every=1", "--retention=24h")


def post(daemon, path: str) -> None:
    status, _, body = http("POST", f"{daemon.http_url}{path}")
    assert status == 200, body


def publish(daemon, topic: str, bodies: list[bytes]) -> None:
    with WireConn(daemon.tcp_hostport) as conn:
        for body in bodies:
            conn.publish(topic, body)


def delivered(daemon, topic: str) -> list[bytes]:
    with WireConn(daemon.tcp_hostport) as conn:
        conn.subscribe(topic, "c", rdy=200)
        return conn.drain(quiet=2)


@pytest.mark.parametrize("restart", [False, True], ids=["running", "kill-9-before-the-unpause"])
@pytest.mark.parametrize("own", [0, 20], ids=["channel-caught-up", "channel-behind"])
def test_an_empty_drops_what_a_paused_topic_held_back(start_nsqd, tmp_path, topic, restart, own):
    data = tmp_path / "data"
    daemon = start_nsqd(*DURABLE, data_path=data)
    post(daemon, f"/topic/create?topic={topic}")
    post(daemon, f"/channel/create?topic={topic}&channel=c")
    publish(daemon, topic, [b"before %d" % i for i in range(own)])
    post(daemon, f"/topic/pause?topic={topic}")
    publish(daemon, topic, [b"held %d" % i for i in range(30)])
    post(daemon, f"/topic/empty?topic={topic}")
    if restart:
        daemon.kill()
        daemon = start_nsqd(*DURABLE, data_path=data)
    post(daemon, f"/topic/unpause?topic={topic}")
    publish(daemon, topic, [b"after %d" % i for i in range(5)])
    assert sorted(delivered(daemon, topic)) == sorted([b"before %d" % i for i in range(own)] +
                                                      [b"after %d" % i for i in range(5)])


def test_depth_counts_nothing_that_was_emptied(start_nsqd, topic):
    daemon = start_nsqd(*DURABLE)
    post(daemon, f"/topic/create?topic={topic}")
    post(daemon, f"/channel/create?topic={topic}&channel=c")
    publish(daemon, topic, [b"own %d" % i for i in range(7)])
    post(daemon, f"/topic/pause?topic={topic}")
    publish(daemon, topic, [b"held %d" % i for i in range(30)])
    post(daemon, f"/topic/empty?topic={topic}")

    def depths():
        _, stats = http_json("GET", f"{daemon.http_url}/stats?format=json&topic={topic}")
        entry = stats["topics"][0]
        return entry["depth"], entry["channels"][0]["depth"]
    wait_until(lambda: depths() == (0, 7), timeout=30)
