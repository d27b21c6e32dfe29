"""nsqd's HTTP API: paths, status codes, bodies and headers as NSQ serves them."""

import json
import socket
import struct
import time

import pytest

from nsqpy.protocol import commands as cmd
from nsqpy.protocol.commands import encode_mpub_body
from tests.support.wire import WireConn, http, http_json, wait_until

V1 = "nsq; version=1.0"


def test_ping_is_plain_ok(shared_nsqd):
    status, headers, body = http("GET", f"{shared_nsqd.http_url}/ping")
    assert (status, body) == (200, b"OK")


def test_info(shared_nsqd):
    status, headers, body = http("GET", f"{shared_nsqd.http_url}/info")
    assert status == 200
    assert headers["X-NSQ-Content-Type"] == V1
    assert headers["Content-Type"].startswith("application/json")
    info = json.loads(body)
    host, port = shared_nsqd.tcp_hostport
    assert info["version"] == "1.3.0"
    assert info["tcp_port"] == port
    assert info["http_port"] == int(shared_nsqd.http_address.rsplit(":", 1)[1])
    assert info["broadcast_address"] == "127.0.0.1"
    assert info["max_heartbeat_interval"] == 60_000_000_000
    assert info["max_output_buffer_size"] == 65536
    assert info["max_deflate_level"] == 6
    assert isinstance(info["start_time"], int) and info["hostname"]


@pytest.mark.parametrize("method,path,status,message", [
    ("GET", "/nope", 404, "NOT_FOUND"),
    ("GET", "/pub", 405, "METHOD_NOT_ALLOWED"),
    ("POST", "/pub?topic=x", 400, "MSG_EMPTY"),
    ("POST", "/topic/create", 400, "MISSING_ARG_TOPIC"),
    ("POST", "/topic/create?topic=bad*name", 400, "INVALID_TOPIC"),
    ("POST", "/topic/delete?topic=never_created", 404, "TOPIC_NOT_FOUND"),
    ("POST", "/topic/pause?topic=never_created", 404, "TOPIC_NOT_FOUND"),
    ("POST", "/channel/create?topic=never_created&channel=c", 404, "TOPIC_NOT_FOUND"),
    ("POST", "/channel/create?channel=c", 400, "MISSING_ARG_TOPIC"),
    ("POST", "/channel/create?topic=x", 400, "MISSING_ARG_CHANNEL"),
    ("POST", "/channel/create?topic=x&channel=b*d", 400, "INVALID_ARG_CHANNEL"),
    ("GET", "/config/no_such_option", 400, "INVALID_OPTION"),
    ("GET", "/config/..%2f..", 404, "NOT_FOUND"),
])
def test_errors_are_json_messages_with_nsq_status(shared_nsqd, method, path, status, message):
    got, headers, body = http(method, shared_nsqd.http_url + path)
    assert got == status
    assert json.loads(body) == {"message": message}
    assert headers["X-NSQ-Content-Type"] == V1


def test_pub_errors(shared_nsqd):
    url = shared_nsqd.http_url
    assert http_json("POST", f"{url}/pub", b"x") == (400, {"message": "MISSING_ARG_TOPIC"})
    assert http_json("POST", f"{url}/pub?topic=a$b", b"x") == (400, {"message": "INVALID_TOPIC"})
    assert http_json("POST", f"{url}/pub?topic=t&defer=x", b"x") == (400, {"message": "INVALID_DEFER"})
    assert http_json("POST", f"{url}/pub?topic=t&defer=3600001", b"x") == (400, {"message": "INVALID_DEFER"})
    assert http_json("POST", f"{url}/pub?topic=t", b"x" * 1048577) == (413, {"message": "MSG_TOO_BIG"})


def test_pub_and_mpub_deliver(shared_nsqd, topic):
    url = shared_nsqd.http_url
    with WireConn(shared_nsqd.tcp_hostport) as c:
        c.subscribe(topic, "ch", rdy=20)
        status, headers, body = http("POST", f"{url}/pub?topic={topic}", b"single")
        assert (status, body) == (200, b"OK")
        assert http("POST", f"{url}/mpub?topic={topic}", b"a\n\nb\nc\n")[2] == b"OK"
        binary = encode_mpub_body([b"x\ny", b"z"])
        assert http("POST", f"{url}/mpub?topic={topic}&binary=true", binary)[2] == b"OK"
        bodies = [m.body for m in c.messages(6)]
        assert bodies == [b"single", b"a", b"b", b"c", b"x\ny", b"z"]  # empty lines skipped


def test_mpub_errors(shared_nsqd):
    url = shared_nsqd.http_url
    assert http_json("POST", f"{url}/mpub?topic=t&binary=true", struct.pack(">i", 0)) == \
        (413, {"message": "BAD_BODY"})
    assert http_json("POST", f"{url}/mpub?topic=t&binary=1", struct.pack(">ii", 1, 0)) == \
        (413, {"message": "BAD_MESSAGE"})
    assert http_json("POST", f"{url}/mpub?topic=t", b"x" * 1048577) == (413, {"message": "MSG_TOO_BIG"})
    assert http_json("POST", f"{url}/mpub?topic=t", b"x" * 5242881) == (413, {"message": "BODY_TOO_BIG"})


def test_topic_and_channel_lifecycle(shared_nsqd, topic):
    url = shared_nsqd.http_url

    def stats():
        return http_json("GET", f"{url}/stats?format=json&topic={topic}")[1]["topics"]

    assert http("POST", f"{url}/topic/create?topic={topic}")[:3:2] == (200, b"")
    assert http("POST", f"{url}/channel/create?topic={topic}&channel=c1")[0] == 200
    assert http("POST", f"{url}/pub?topic={topic}", b"m")[0] == 200
    assert stats()[0]["channels"][0]["depth"] == 1
    assert http("POST", f"{url}/channel/empty?topic={topic}&channel=c1")[0] == 200
    assert stats()[0]["channels"][0]["depth"] == 0
    assert http("POST", f"{url}/channel/delete?topic={topic}&channel=c1")[0] == 200
    assert http_json("POST", f"{url}/channel/delete?topic={topic}&channel=c1") == \
        (404, {"message": "CHANNEL_NOT_FOUND"})
    assert http("POST", f"{url}/pub?topic={topic}", b"m")[0] == 200
    assert stats()[0]["depth"] == 1  # no channel: the topic keeps it
    assert http("POST", f"{url}/topic/empty?topic={topic}")[0] == 200
    assert stats()[0]["depth"] == 0
    assert http("POST", f"{url}/topic/delete?topic={topic}")[0] == 200
    assert stats() is None


def test_stats_json_schema_and_filters(shared_nsqd, topic):
    url = shared_nsqd.http_url
    with WireConn(shared_nsqd.tcp_hostport) as c:
        c.identify(client_id="statsclient", user_agent="tests/1.0")
        c.subscribe(topic, "ch", rdy=3)
        c.publish(topic, b"hello")
        c.message()
        status, data = http_json("GET", f"{url}/stats?format=json&topic={topic}")
        assert status == 200
        assert set(data) == {"version", "health", "start_time", "topics", "memory", "producers"}
        assert data["health"] == "OK"
        (t,) = data["topics"]
        assert set(t) == {"topic_name", "channels", "depth", "backend_depth", "message_count",
                          "message_bytes", "paused", "e2e_processing_latency",
                          "memory_depth", "memory_only_count", "unsynced_count", "ttl_ms", "expire_action",
                          "retention_ms", "retention_bytes", "publish_key_window_ms",
                          "max_depth", "full_policy", "dropped_count"}
        assert (t["topic_name"], t["message_count"], t["message_bytes"]) == (topic, 1, 5)
        (ch,) = t["channels"]
        assert ch["in_flight_count"] == 1 and ch["client_count"] == 1 and ch["message_count"] == 1
        assert (ch["memory_depth"], ch["memory_only_count"], ch["unsynced_count"]) == (0, 1, 0)
        (client,) = ch["clients"]
        assert client["client_id"] == "statsclient"
        assert client["user_agent"] == "tests/1.0"
        assert client["state"] == 3 and client["ready_count"] == 3 and client["in_flight_count"] == 1
        assert client["version"] == "V2"
        (producer,) = data["producers"]
        assert producer["pub_counts"] == [{"topic": topic, "count": 1}]
        assert ch["e2e_processing_latency"] == {"count": 0, "percentiles": None}

        _, lean = http_json("GET", f"{url}/stats?format=json&topic={topic}&include_clients=false"
                                   f"&include_mem=false")
        assert "memory" not in lean and lean["producers"] is None
        assert lean["topics"][0]["channels"][0]["clients"] is None
        _, other = http_json("GET", f"{url}/stats?format=json&topic={topic}&channel=nope")
        assert other["topics"] is None

        status, _, text = http("GET", f"{url}/stats")
        assert status == 200 and text.startswith(b"nsqd v1.3.0") and f"[{topic}".encode() in text


def test_config_get_and_put(shared_nsqd):
    url = shared_nsqd.http_url
    assert http_json("GET", f"{url}/config/mem_queue_size") == (200, 10000)
    assert http_json("GET", f"{url}/config/msg_timeout") == (200, 2_000_000_000)
    assert http_json("GET", f"{url}/config/nsqlookupd_tcp_addresses") == (200, [])
    assert http_json("PUT", f"{url}/config/nsqlookupd_tcp_addresses", b'["127.0.0.1:4160"]') == \
        (200, ["127.0.0.1:4160"])
    assert http_json("GET", f"{url}/config/nsqlookupd_tcp_addresses") == (200, ["127.0.0.1:4160"])
    assert http_json("PUT", f"{url}/config/nsqlookupd_tcp_addresses", b'["no-port"]') == \
        (400, {"message": "INVALID_VALUE"})
    assert http_json("PUT", f"{url}/config/nsqlookupd_tcp_addresses", b"[]") == (200, [])
    assert http_json("PUT", f"{url}/config/log_level", b"debug") == (200, 1)
    assert http_json("PUT", f"{url}/config/log_level", b"info") == (200, 2)
    assert http_json("PUT", f"{url}/config/mem_queue_size", b"5") == (400, {"message": "INVALID_OPTION"})


def test_e2e_latency_percentiles_after_fin(start_nsqd, topic):
    daemon = start_nsqd("--e2e-processing-latency-percentile=1.0,0.5")
    url = daemon.http_url

    def e2e(level):
        _, data = http_json("GET", f"{url}/stats?format=json&topic={topic}")
        t = data["topics"][0]
        return t["e2e_processing_latency"] if level == "topic" else t["channels"][0]["e2e_processing_latency"]

    with WireConn(daemon.tcp_hostport) as c:
        c.subscribe(topic, "ch", rdy=10)
        assert http("POST", f"{url}/mpub?topic={topic}", b"1\n2\n3\n4\n5")[0] == 200
        for message in c.messages(5):
            c.send(cmd.fin(message.id))
        latency = wait_until(lambda: (e := e2e("channel"))["count"] == 5 and e)
    assert [p["quantile"] for p in latency["percentiles"]] == [1.0, 0.5]
    assert latency["percentiles"][0]["value"] >= latency["percentiles"][1]["value"] > 0
    assert e2e("topic")["count"] == 5
    assert b"e2e%: 100.0%=" in http("GET", f"{url}/stats")[2]


def test_statsd_pushes_counters_and_gauges(start_nsqd, topic):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.bind(("127.0.0.1", 0))
        udp.settimeout(30)
        statsd = f"127.0.0.1:{udp.getsockname()[1]}"
        daemon = start_nsqd(f"--statsd-address={statsd}", "--statsd-interval=200ms",
                            "--statsd-udp-packet-size=200")
        url = daemon.http_url
        assert http("POST", f"{url}/mpub?topic={topic}", b"a\nb\nc")[0] == 200
        port = url.rsplit(":", 1)[1]
        head = f"nsq.127_0_0_1_{port}."
        lines = []
        deadline = time.monotonic() + 5
        # read whole pushes (each ends with mem.gc_runs) until one carries the count
        while time.monotonic() < deadline and not (
                f"{head}topic.{topic}.message_count:3|c" in lines and lines[-1].startswith(f"{head}mem.gc_runs")):
            packet = udp.recv(65536)
            assert len(packet) <= 200
            lines.extend(packet.decode().splitlines())
    assert f"{head}topic.{topic}.message_count:3|c" in lines
    assert f"{head}topic.{topic}.depth:3|g" in lines
    assert any(line.startswith(f"{head}mem.heap_objects:") and line.endswith("|g") for line in lines)
