"""nsqadmin's JSON API against a real nsqlookupd and two real nsqd: the
routes, field names and aggregation of Go's nsqadmin, and actions that
change the daemons' state."""

import pytest

from nsqpy.protocol import commands as cmd
from tests.nsqadmin.helpers import call
from tests.support.wire import http_json, wait_until


@pytest.fixture
def spread_topic(cluster, topic):
    """``topic`` on both nsqd (3 messages on nsqd0, 2 on nsqd1), channel ``ch`` on both."""
    cluster.publish(0, topic, b"a", b"b", b"c")
    cluster.publish(1, topic, b"d", b"e")
    cluster.create_channel(0, topic, "ch")
    cluster.create_channel(1, topic, "ch")
    cluster.wait_registered(topic, 2)
    # the topic hands what it held to its first channel in the background
    wait_until(lambda: all(cluster.nsqd_topic(i, topic)["depth"] == 0 for i in (0, 1)))
    return topic


def test_topics_lists_what_nsqlookupd_knows(admin, cluster, spread_topic):
    status, answer = call(admin, "GET", "/api/topics")
    assert status == 200
    assert spread_topic in answer["topics"] and answer["message"] == ""
    assert answer["topics"] == sorted(answer["topics"])


def test_inactive_topics_are_those_without_producers(admin, cluster, topic):
    http_json("POST", f"{cluster.lookupd.http_url}/channel/create?topic={topic}&channel=waiting")
    status, answer = call(admin, "GET", "/api/topics?inactive=true")
    assert status == 200
    assert answer["topics"][topic] == ["waiting"]


def test_topic_aggregates_every_node(admin, cluster, spread_topic):
    status, topic = call(admin, "GET", f"/api/topics/{spread_topic}")
    assert status == 200, topic
    assert (topic["node"], topic["hostname"], topic["topic_name"]) == ("*", "", spread_topic)
    assert topic["message_count"] == 5 and topic["depth"] == 0 and topic["paused"] is False
    assert [n["node"] for n in topic["nodes"]] == sorted([cluster.node(0), cluster.node(1)])
    by_node = {n["node"]: n for n in topic["nodes"]}
    assert by_node[cluster.node(0)]["message_count"] == 3
    assert by_node[cluster.node(1)]["message_count"] == 2
    [channel] = topic["channels"]
    assert channel["node"] == "*" and channel["channel_name"] == "ch"
    # the first channel of a topic receives what the topic held
    assert channel["depth"] == 5 and channel["memory_depth"] + channel["backend_depth"] == 5
    assert len(channel["nodes"]) == 2
    for key in ("in_flight_count", "deferred_count", "requeue_count", "timeout_count", "client_count",
                "e2e_processing_latency"):
        assert key in channel
    assert topic["e2e_processing_latency"]["host"] == "*"
    assert topic["message"] == ""


def test_channel_lists_consumers_with_their_attributes(admin, cluster, spread_topic, consumer):
    consumer(0, spread_topic, "ch", client_id="worker-a", hostname="host-a", user_agent="tests/1.0")
    consumer(1, spread_topic, "ch", client_id="worker-b", hostname="host-b", user_agent="tests/1.0")
    status, channel = call(admin, "GET", f"/api/topics/{spread_topic}/ch")
    assert status == 200, channel
    assert channel["client_count"] == 2 and channel["depth"] == 5
    assert sorted(c["client_id"] for c in channel["clients"]) == ["worker-a", "worker-b"]
    client = next(c for c in channel["clients"] if c["client_id"] == "worker-a")
    assert client["node"] == cluster.node(0) and client["hostname"] == "host-a"
    assert client["user_agent"] == "tests/1.0" and client["version"] == "V2"
    assert client["connected"] % 1_000_000_000 == 0
    for key in ("remote_address", "connect_ts", "in_flight_count", "ready_count", "finish_count",
                "requeue_count", "message_count", "sample_rate", "deflate", "snappy", "authed",
                "auth_identity", "auth_identity_url", "tls", "tls_cipher_suite", "tls_version",
                "tls_negotiated_protocol", "tls_negotiated_protocol_is_mutual"):
        assert key in client, key


def test_unknown_topic_and_channel_are_404(admin, spread_topic):
    assert call(admin, "GET", "/api/topics/never_published") == (404, {"message": "TOPIC_NOT_FOUND"})
    assert call(admin, "GET", f"/api/topics/{spread_topic}/nope") == (404, {"message": "CHANNEL_NOT_FOUND"})


def test_topic_only_nsqlookupd_knows_is_an_upstream_error_as_in_go(admin, cluster, topic):
    assert http_json("POST", f"{cluster.lookupd.http_url}/topic/create?topic={topic}")[0] == 200
    assert http_json("POST", f"{cluster.lookupd.http_url}/channel/create?topic={topic}&channel=ch")[0] == 200
    upstream_error = (502, {"message": "UPSTREAM_ERROR: failed to query any nsqd: "})
    assert call(admin, "GET", f"/api/topics/{topic}") == upstream_error
    assert call(admin, "GET", f"/api/topics/{topic}/ch") == upstream_error


def test_nodes_and_one_node(admin, cluster, spread_topic):
    status, answer = call(admin, "GET", "/api/nodes")
    assert status == 200
    nodes = {f"{n['broadcast_address']}:{n['http_port']}": n for n in answer["nodes"]}
    assert set(nodes) == {cluster.node(0), cluster.node(1)}
    node = nodes[cluster.node(0)]
    assert node["version"] == "1.3.0" and node["out_of_date"] is False
    assert node["tcp_port"] == cluster.nsqds[0].tcp_hostport[1]
    assert node["remote_addresses"][0].startswith(cluster.lookupd.http_address + "/")
    assert {"topic": spread_topic, "tombstoned": False} in node["topics"]

    status, detail = call(admin, "GET", f"/api/nodes/{cluster.node(1)}")
    assert status == 200
    assert detail["node"] == cluster.node(1)
    mine = next(t for t in detail["topics"] if t["topic_name"] == spread_topic)
    assert mine["message_count"] == 2 and mine["channels"][0]["channel_name"] == "ch"
    assert detail["total_messages"] == sum(t["message_count"] for t in detail["topics"])
    assert call(admin, "GET", "/api/nodes/10.9.9.9:4151") == (404, {"message": "NODE_NOT_FOUND"})


def test_counter_has_every_channel_on_every_node(admin, cluster, spread_topic):
    status, answer = call(admin, "GET", "/api/counter")
    assert status == 200
    entry = answer["stats"][f"{spread_topic}:ch:{cluster.node(0)}"]
    assert entry == {"node": cluster.node(0), "topic_name": spread_topic, "channel_name": "ch", "message_count": 3}
    assert f"{spread_topic}:ch:{cluster.node(1)}" in answer["stats"]


def test_pause_and_unpause_topic_and_channel_on_every_nsqd(admin, cluster, spread_topic):
    assert call(admin, "POST", f"/api/topics/{spread_topic}", {"action": "pause"}) == (200, {"message": ""})
    assert all(cluster.nsqd_topic(i, spread_topic)["paused"] for i in (0, 1))
    assert call(admin, "GET", f"/api/topics/{spread_topic}")[1]["paused"] is True
    assert call(admin, "POST", f"/api/topics/{spread_topic}", {"action": "unpause"})[0] == 200
    assert not any(cluster.nsqd_topic(i, spread_topic)["paused"] for i in (0, 1))

    assert call(admin, "POST", f"/api/topics/{spread_topic}/ch", {"action": "pause"})[0] == 200
    assert all(cluster.nsqd_topic(i, spread_topic)["channels"][0]["paused"] for i in (0, 1))
    assert call(admin, "POST", f"/api/topics/{spread_topic}/ch", {"action": "unpause"})[0] == 200
    assert not any(cluster.nsqd_topic(i, spread_topic)["channels"][0]["paused"] for i in (0, 1))


def test_empty_channel_and_topic(admin, cluster, spread_topic):
    assert call(admin, "POST", f"/api/topics/{spread_topic}/ch", {"action": "empty"})[0] == 200
    assert [cluster.nsqd_topic(i, spread_topic)["channels"][0]["depth"] for i in (0, 1)] == [0, 0]
    http_json("POST", f"{cluster.nsqds[0].http_url}/topic/pause?topic={spread_topic}")
    cluster.publish(0, spread_topic, b"held")
    assert cluster.nsqd_topic(0, spread_topic)["depth"] == 1
    assert call(admin, "POST", f"/api/topics/{spread_topic}", {"action": "empty"})[0] == 200
    assert cluster.nsqd_topic(0, spread_topic)["depth"] == 0


def test_delete_channel_then_topic(admin, cluster, spread_topic):
    assert call(admin, "DELETE", f"/api/topics/{spread_topic}/ch") == (200, {"message": ""})
    assert all(cluster.nsqd_topic(i, spread_topic)["channels"] == [] for i in (0, 1))
    assert call(admin, "DELETE", f"/api/topics/{spread_topic}") == (200, {"message": ""})
    assert cluster.nsqd_topic(0, spread_topic) is None and cluster.nsqd_topic(1, spread_topic) is None
    wait_until(lambda: spread_topic not in cluster.lookupd_topics(), timeout=15)


def test_create_topic_and_channel(admin, cluster, topic):
    assert call(admin, "POST", "/api/topics", {"topic": topic, "channel": "made"}) == (200, {"message": ""})
    assert topic in cluster.lookupd_topics()
    channels = http_json("GET", f"{cluster.lookupd.http_url}/channels?topic={topic}")[1]["channels"]
    assert channels == ["made"]


def test_create_channel_reaches_nsqd_producing_the_topic(admin, cluster, topic):
    cluster.publish(1, topic, b"x")
    cluster.wait_registered(topic, 1)
    assert call(admin, "POST", "/api/topics", {"topic": topic, "channel": "late"})[0] == 200
    assert [c["channel_name"] for c in cluster.nsqd_topic(1, topic)["channels"]] == ["late"]


def test_tombstone_hides_the_node_and_deletes_the_topic_there(admin, cluster, spread_topic):
    node = cluster.node(1)
    assert call(admin, "DELETE", f"/api/nodes/{node}", {"topic": spread_topic}) == (200, {"message": ""})
    assert cluster.nsqd_topic(1, spread_topic) is None
    assert cluster.nsqd_topic(0, spread_topic) is not None
    cluster.wait_registered(spread_topic, 1)
    assert call(admin, "DELETE", "/api/nodes/10.9.9.9:1", {"topic": spread_topic})[0] == 404


@pytest.mark.parametrize("method, path, body, expected", [
    ("GET", "/api/topics/bad%20topic", None, (400, "INVALID_TOPIC")),
    ("GET", "/api/topics/ok/bad%20channel!", None, (400, "INVALID_CHANNEL")),
    ("POST", "/api/topics", {"topic": "bad topic"}, (400, "INVALID_TOPIC")),
    ("POST", "/api/topics", {"topic": "ok", "channel": "bad/channel"}, (400, "INVALID_CHANNEL")),
    ("POST", "/api/topics", b"not json", (400, "INVALID_BODY")),
    ("POST", "/api/topics/ok", {"action": "explode"}, (400, "INVALID_ACTION")),
    ("POST", "/api/topics/ok/ch", {}, (400, "INVALID_ACTION")),
    ("DELETE", "/api/nodes/127.0.0.1:1", {"topic": "a b"}, (400, "INVALID_TOPIC")),
    ("GET", "/api/graphite?metric=bogus&target=x", None, (400, "INVALID_ARG_METRIC")),
    ("GET", "/api/graphite?metric=rate", None, (400, "INVALID_ARG_TARGET")),
    ("GET", "/api/nowhere", None, (404, "NOT_FOUND")),
    ("PUT", "/api/topics", None, (405, "METHOD_NOT_ALLOWED")),
])
def test_bad_requests_get_nsq_codes(admin, method, path, body, expected):
    status, answer = call(admin, method, path, body)
    assert (status, answer["message"]) == expected


def test_v1_conventions(admin):
    import urllib.request
    with urllib.request.urlopen(admin.http_url + "/api/topics", timeout=30) as response:
        assert response.headers["X-NSQ-Content-Type"] == "nsq; version=1.0"
        assert response.headers["Content-Type"] == "application/json; charset=utf-8"
    with urllib.request.urlopen(admin.http_url + "/ping", timeout=30) as response:
        assert response.read() == b"OK"


def test_history_gives_rates_and_drain_time(admin, cluster, spread_topic, consumer):
    history = f"/api/history/topics/{spread_topic}/ch"
    wait_until(lambda: call(admin, "GET", history)[1]["points"], timeout=30)  # sampled while still queued
    conn = consumer(0, spread_topic, "ch", rdy=100)
    for message in conn.messages(3):  # finishes nsqd0's three
        conn.send(cmd.fin(message.id))

    def sampled():
        status, answer = call(admin, "GET", f"/api/history/topics/{spread_topic}/ch")
        return answer if status == 200 and any(p["rate_out"] > 0 for p in answer["points"]) else None
    answer = wait_until(sampled, timeout=30)
    assert answer["interval"] == 0.2 and answer["retention"] == 3600
    assert answer["points"][-1]["depth"] == 2  # nsqd1's two are still queued
    assert answer["rate_out"] == answer["points"][-1]["rate_out"]  # the headline is the charts' last point
    assert answer["rate_out_label"] == f"{answer['rate_out']:,.1f}/s"
    assert {"t", "depth", "in_flight", "deferred", "rate_in", "rate_out"} <= set(answer["points"][0])
    status, topic_history = call(admin, "GET", f"/api/history/topics/{spread_topic}")
    assert status == 200 and topic_history["points"]


def test_ephemeral_channel_by_its_escaped_name(admin, cluster, spread_topic, consumer):
    consumer(0, spread_topic, "live#ephemeral", client_id="watcher")
    status, channel = call(admin, "GET", f"/api/topics/{spread_topic}/live%23ephemeral")
    assert status == 200 and channel["channel_name"] == "live#ephemeral"
    assert [c["client_id"] for c in channel["clients"]] == ["watcher"]
    status, page = call(admin, "GET", f"/topics/{spread_topic}/live%23ephemeral")
    assert status == 200 and "watcher" in page["text"]
