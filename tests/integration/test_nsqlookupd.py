"""nsqlookupd's V1 protocol and HTTP API, against a real process."""

import json
import time

import pytest

from nsqpy.protocol import lookup as v1
from tests.support.wire import LookupConn, http, http_json, wait_until

PEER = {"broadcast_address": "node1", "hostname": "host1", "tcp_port": 4150, "http_port": 4151,
        "version": "1.3.0"}


def connect(lookupd, **kw) -> LookupConn:
    host, _, port = lookupd.tcp_address.rpartition(":")
    return LookupConn((host, int(port)), **kw)


def test_identify_answers_with_lookupds_own_info(start_lookupd):
    lookupd = start_lookupd()
    with connect(lookupd) as c:
        info = json.loads(c.request(v1.identify(PEER)))
        assert info["tcp_port"] == int(lookupd.tcp_address.rsplit(":", 1)[1])
        assert info["http_port"] == int(lookupd.http_address.rsplit(":", 1)[1])
        assert info["broadcast_address"] == "127.0.0.1" and info["version"] == "1.3.0" and info["hostname"]
        assert c.request(v1.PING) == b"OK"
        assert c.request(v1.identify(PEER)) == b"E_INVALID cannot IDENTIFY again"
        c.expect_closed()


@pytest.mark.parametrize("first,answer", [
    (v1.register("t"), b"E_INVALID client must IDENTIFY"),
    (b"BOGUS\n", b"E_INVALID invalid command BOGUS"),
    (v1.identify({"hostname": "x"}), b"E_BAD_BODY IDENTIFY missing fields"),
    (b"IDENTIFY\n\x00\x00\x00\x08not json", b"E_BAD_BODY IDENTIFY failed to decode JSON body"),
])
def test_v1_errors_are_fatal(start_lookupd, first, answer):
    lookupd = start_lookupd()
    with connect(lookupd) as c:
        assert c.request(first) == answer
        c.expect_closed()


def test_bad_magic(start_lookupd):
    lookupd = start_lookupd()
    with connect(lookupd, magic=b"  V2") as c:
        assert c.request(b"").startswith(b"E_BAD_PROTOCOL")
        c.expect_closed()


def test_register_errors(start_lookupd):
    lookupd = start_lookupd()
    for command, answer in [(b"REGISTER\n", b"E_INVALID REGISTER insufficient number of params"),
                            (b"REGISTER bad*topic\n", b"E_BAD_TOPIC REGISTER topic name 'bad*topic' is not valid"),
                            (b"UNREGISTER t bad:ch\n", b"E_BAD_CHANNEL UNREGISTER channel name 'bad:ch' is not valid")]:
        with connect(lookupd) as c:
            c.request(v1.identify(PEER))
            assert c.request(command) == answer
            c.expect_closed()


def test_bad_names_are_quoted_with_their_bytes_as_they_came(start_lookupd):
    """Go's nsqlookupd writes ``'%s'``: the raw bytes, UTF-8 or not, unescaped."""
    lookupd = start_lookupd()
    for name in ["h\u00e9llo".encode(), b"a\xffb", b'a"b\\', b"a'b\x01"]:
        for command, answer in [(b"REGISTER %s\n", b"E_BAD_TOPIC REGISTER topic name '%s' is not valid"),
                                (b"UNREGISTER t %s\n", b"E_BAD_CHANNEL UNREGISTER channel name '%s' is not valid")]:
            with connect(lookupd) as c:
                c.request(v1.identify(PEER))
                assert c.request(command % name) == answer % name
                c.expect_closed()


def test_registrations_drive_lookup_topics_channels_and_nodes(start_lookupd):
    lookupd = start_lookupd()
    url = lookupd.http_url
    with connect(lookupd) as c:
        c.request(v1.identify(PEER))
        assert c.request(v1.register("t", "c1")) == b"OK"
        assert c.request(v1.register("t", "c2")) == b"OK"
        assert c.request(v1.register("solo")) == b"OK"
        status, headers, body = http("GET", f"{url}/lookup?topic=t")
        assert status == 200 and headers["X-NSQ-Content-Type"] == "nsq; version=1.0"
        data = json.loads(body)
        assert data["channels"] == ["c1", "c2"]
        (producer,) = data["producers"]
        assert {k: producer[k] for k in PEER} == PEER
        assert set(producer) == {*PEER, "remote_address"}
        assert http_json("GET", f"{url}/topics") == (200, {"topics": ["solo", "t"]})
        assert http_json("GET", f"{url}/channels?topic=t") == (200, {"channels": ["c1", "c2"]})
        assert http_json("GET", f"{url}/channels?topic=nope") == (200, {"channels": []})
        _, nodes = http_json("GET", f"{url}/nodes")
        (node,) = nodes["producers"]
        assert node["topics"] == ["solo", "t"] and node["tombstones"] == [False, False]
        assert c.request(v1.unregister("t", "c2")) == b"OK"
        assert http_json("GET", f"{url}/channels?topic=t")[1] == {"channels": ["c1", "c2"]}  # durable: kept
    # the connection closed: its producers are gone, durable registrations stay
    wait_until(lambda: http_json("GET", f"{url}/lookup?topic=t")[1]["producers"] == [])
    assert http_json("GET", f"{url}/nodes") == (200, {"producers": []})


def test_http_api_errors_and_edits(start_lookupd):
    lookupd = start_lookupd()
    url = lookupd.http_url
    assert http("GET", f"{url}/ping")[2] == b"OK"
    assert http_json("GET", f"{url}/info") == (200, {"version": "1.3.0"})
    assert http_json("GET", f"{url}/lookup") == (400, {"message": "MISSING_ARG_TOPIC"})
    assert http_json("GET", f"{url}/lookup?topic=none") == (404, {"message": "TOPIC_NOT_FOUND"})
    assert http_json("POST", f"{url}/topic/create?topic=b*d") == (400, {"message": "INVALID_ARG_TOPIC"})
    assert http_json("POST", f"{url}/channel/create?topic=t") == (400, {"message": "MISSING_ARG_CHANNEL"})
    assert http_json("POST", f"{url}/channel/delete?topic=t&channel=c") == (404, {"message": "CHANNEL_NOT_FOUND"})
    assert http_json("POST", f"{url}/topic/tombstone?topic=t") == (400, {"message": "MISSING_ARG_NODE"})
    assert http_json("GET", f"{url}/nope") == (404, {"message": "NOT_FOUND"})
    assert http_json("POST", f"{url}/topics") == (405, {"message": "METHOD_NOT_ALLOWED"})
    assert http("POST", f"{url}/channel/create?topic=t&channel=c")[0] == 200
    assert http_json("GET", f"{url}/lookup?topic=t") == (200, {"channels": ["c"], "producers": []})
    assert http("POST", f"{url}/channel/delete?topic=t&channel=c")[0] == 200
    assert http("POST", f"{url}/topic/delete?topic=t")[0] == 200
    assert http_json("GET", f"{url}/topics") == (200, {"topics": []})
    assert http("POST", f"{url}/topic/delete?topic=never")[0] == 200


def test_tombstone_hides_a_producer_from_lookup_for_its_lifetime(start_lookupd):
    # 3 s: the checks below all see the tombstone, on a busy machine too
    lookupd = start_lookupd("--tombstone-lifetime=3s")
    url = lookupd.http_url
    with connect(lookupd) as c:
        c.request(v1.identify(PEER))
        c.request(v1.register("t"))
        c.request(v1.register("u"))
        assert http("POST", f"{url}/topic/tombstone?topic=t&node=node1:4151")[0] == 200
        assert http_json("GET", f"{url}/lookup?topic=t")[1]["producers"] == []
        assert len(http_json("GET", f"{url}/lookup?topic=u")[1]["producers"]) == 1  # only that topic
        (node,) = http_json("GET", f"{url}/nodes")[1]["producers"]
        assert dict(zip(node["topics"], node["tombstones"])) == {"t": True, "u": False}
        _, debug = http_json("GET", f"{url}/debug")
        assert debug["topic:t:"][0]["tombstoned"] is True
        wait_until(lambda: http_json("GET", f"{url}/lookup?topic=t")[1]["producers"], timeout=15)


def test_a_producer_that_stops_pinging_becomes_inactive(start_lookupd):
    """Inactive after 3 s without a PING: PINGed at 1.5 s, still listed at
    3.3 s (1.8 s after the PING), with over a second to spare each time on a
    busy machine."""
    lookupd = start_lookupd("--inactive-producer-timeout=3s")
    url = lookupd.http_url
    with connect(lookupd) as c:
        identified = time.monotonic()
        c.request(v1.identify(PEER))
        c.request(v1.register("t"))
        assert len(http_json("GET", f"{url}/lookup?topic=t")[1]["producers"]) == 1
        time.sleep(max(0.0, identified + 1.5 - time.monotonic()))
        pinged = time.monotonic()
        c.request(v1.PING)
        time.sleep(max(0.0, pinged + 1.8 - time.monotonic()))  # past the 3 s from IDENTIFY
        assert len(http_json("GET", f"{url}/lookup?topic=t")[1]["producers"]) == 1  # the PING kept it
        wait_until(lambda: http_json("GET", f"{url}/lookup?topic=t")[1]["producers"] == [], timeout=15)
        assert http_json("GET", f"{url}/nodes")[1] == {"producers": []}


def test_version_and_flags():
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-m", "nsqpy.cli.nsqlookupd", "--version"], capture_output=True,
                            text=True, timeout=20)
    assert result.stdout.startswith("nsqlookupd v1.3.0 (built w/python")


def test_config_file_and_go_style_flags(start_lookupd, tmp_path):
    config = tmp_path / "nsqlookupd.cfg"
    config.write_text('inactive_producer_timeout = "1s"\ntombstone_lifetime = "1h"\n')
    lookupd = start_lookupd(f"-config={config}", "-tombstone-lifetime", "2s")
    url = lookupd.http_url
    with connect(lookupd) as c:
        c.request(v1.identify(PEER))
        c.request(v1.register("t"))
        http("POST", f"{url}/topic/tombstone?topic=t&node=node1:4151")
        assert http_json("GET", f"{url}/lookup?topic=t")[1]["producers"] == []

        def pinged_and_visible():
            c.request(v1.PING)  # stay active under the file's 1 s inactivity timeout
            time.sleep(0.2)
            return http_json("GET", f"{url}/lookup?topic=t")[1]["producers"]

        # the flag's 2 s tombstone beat the file's 1 h
        wait_until(pinged_and_visible, timeout=15)
        # silent now: the file's 1 s inactivity timeout drops the node
        wait_until(lambda: http_json("GET", f"{url}/nodes")[1] == {"producers": []}, timeout=15)


def test_nsqd_is_registered_by_the_time_it_says_where_it_listens(start_lookupd, start_nsqd, tmp_path, topic):
    """As NSQ's nsqd: a client that starts nsqd and asks nsqlookupd as soon as
    the listening lines are out finds it (and its topics), without retrying."""
    lookupd = start_lookupd()
    data = tmp_path / "registered"
    nsqd = start_nsqd(data_path=data)
    assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    nsqd.stop()
    nsqd = start_nsqd(f"--lookupd-tcp-address={lookupd.addresses['TCP']}", data_path=data)
    # asked at once, no retry: the answer is what a client sees right after the listening lines
    status, lookup = http_json("GET", f"{lookupd.http_url}/lookup?topic={topic}")
    assert status == 200 and [p["tcp_port"] for p in lookup["producers"]] == [nsqd.tcp_hostport[1]]
    lines = nsqd.output.splitlines()
    adding = next(i for i, line in enumerate(lines) if f"LOOKUP({lookupd.addresses['TCP']}): adding peer" in line)
    listening = next(i for i, line in enumerate(lines) if "TCP: listening on" in line)
    assert adding < listening
    assert any("peer info {TCPPort:" in line for line in lines)
