"""Keyed publishes (KPUB, KDPUB, KMPUB, HTTP /kpub and /kmpub): the first
message with a key is queued, a repeat within the topic's window is
answered OK and queued nowhere, across restarts and kill -9; clients that
send no key see nothing new, and NSQ's own nsqd refuses a key out loud."""

import json
import time
from urllib.parse import quote

import pytest

from nsqpy.localcluster import nsqd_process
from nsqpy.protocol import commands as cmd
from nsqpy.protocol import keyed
from tests.support.gonsqd import GO_NSQD
from tests.support.wire import WireConn, http, http_json

DURABLE = ("--mem-queue-size=0", "--sync-every=1")


def kpub(conn: WireConn, topic: str, key: bytes, body: bytes) -> None:
    conn.send(keyed.kpub(topic, key, body))
    conn.expect_ok()


def received(daemon, topic: str, channel: str = "c") -> list[bytes]:
    """Every message the channel holds, FINished (none arrives for 1.5 s after the last)."""
    with WireConn(daemon.tcp_hostport) as conn:
        conn.subscribe(topic, channel, rdy=100)
        return conn.drain()


def post(url: str, body: bytes | None = None) -> tuple[int, str]:
    """The status and, for an error, nsqd's message."""
    status, _, answer = http("POST", url, body)
    return status, (json.loads(answer)["message"] if status >= 400 else answer.decode())


def create_channel(daemon, topic: str, channel: str = "c") -> None:
    assert http("POST", f"{daemon.http_url}/topic/create?topic={topic}")[0] == 200
    assert http("POST", f"{daemon.http_url}/channel/create?topic={topic}&channel={channel}")[0] == 200


def topic_config(daemon, topic: str, **settings) -> tuple[int, str]:
    query = "&".join(f"{name}={value}" for name, value in settings.items())
    return post( f"{daemon.http_url}/topic/config?topic={topic}&{query}")


def test_a_repeated_key_is_answered_ok_and_queued_once(nsqd, topic):
    create_channel(nsqd, topic)
    with WireConn(nsqd.tcp_hostport) as conn:
        for key, body in [(b"a", b"first"), (b"a", b"first again"), (b"b", b"second"), (b"a", b"third try")]:
            kpub(conn, topic, key, body)
        conn.send(keyed.kdpub(topic, 10, b"d", b"deferred"))
        conn.expect_ok()
        conn.send(keyed.kdpub(topic, 10, b"d", b"deferred again"))
        conn.expect_ok()
        # within one KMPUB and against earlier keys alike
        conn.send(keyed.kmpub(topic, [b"b", b"m1", b"m2", b"m1"], [b"x", b"mpub 1", b"mpub 2", b"mpub 1 again"]))
        conn.expect_ok()
        conn.publish(topic, b"unkeyed")
        conn.publish(topic, b"unkeyed")
    assert sorted(received(nsqd, topic)) == sorted([b"first", b"second", b"deferred", b"mpub 1", b"mpub 2",
                                                    b"unkeyed", b"unkeyed"])
    _, stats = http_json("GET", f"{nsqd.http_url}/stats?format=json&topic={topic}")
    assert stats["topics"][0]["message_count"] == 7
    assert (stats["topics"][0]["publish_keys"], stats["topics"][0]["publish_repeat_count"]) == (5, 5)


def test_http_takes_keys_on_its_own_routes(nsqd, topic):
    url = nsqd.http_url
    create_channel(nsqd, topic)
    for _ in range(2):
        assert http("POST", f"{url}/kpub?topic={topic}&key={quote('order:17/line 3'.replace(' ', '_'))}",
                    b"one")[0] == 200
        assert http("POST", f"{url}/kmpub?topic={topic}", b"k1 two\nk2 three\n\nk1 two again\n")[0] == 200
        assert http("POST", f"{url}/kmpub?topic={topic}&binary=true",
                    keyed.encode_kmpub_body([b"k3", b"k2"], [b"four", b"three again"]))[0] == 200
    # a key on /pub or /mpub would be ignored by NSQ's nsqd: refused, nothing queued
    assert post(f"{url}/pub?topic={topic}&key=k9", b"x") == (400, "INVALID_ARG_KEY keyed publishes go to /kpub")
    assert http("POST", f"{url}/mpub?topic={topic}&key=k9", b"x")[0] == 400
    assert sorted(received(nsqd, topic)) == [b"four", b"one", b"three", b"two"]


@pytest.mark.parametrize("stop", ["clean", "kill -9 (durable mode)"])
def test_keys_are_kept_across_a_restart(start_nsqd, tmp_path, topic, stop):
    data = tmp_path / "data"
    extra = DURABLE if stop != "clean" else ()
    first = start_nsqd(*extra, data_path=data)
    create_channel(first, topic)
    with WireConn(first.tcp_hostport) as conn:
        for index in range(200):
            kpub(conn, topic, b"key-%d" % index, b"message %d" % index)
    if stop == "clean":
        first.stop()
    else:
        first.kill()
    second = start_nsqd(*extra, data_path=data)
    with WireConn(second.tcp_hostport) as conn:
        for index in range(0, 220, 2):  # repeats of half of them, and 10 new
            kpub(conn, topic, b"key-%d" % index, b"repeat %d" % index)
    bodies = received(second, topic)
    assert sorted(bodies) == sorted([b"message %d" % i for i in range(200)] +
                                    [b"repeat %d" % i for i in range(200, 220, 2)])


def test_a_key_is_forgotten_when_its_window_ends(nsqd, topic):
    create_channel(nsqd, topic)
    status, body = topic_config(nsqd, topic, publish_key_window="1s")
    assert status == 200, body
    assert http_json("GET", f"{nsqd.http_url}/topic/config?topic={topic}")[1]["publish_key_window_ms"] == 1000
    with WireConn(nsqd.tcp_hostport) as conn:
        kpub(conn, topic, b"k", b"before")
        kpub(conn, topic, b"k", b"repeat within the window")
        time.sleep(1.2)
        kpub(conn, topic, b"k", b"after the window")
    assert sorted(received(nsqd, topic)) == [b"after the window", b"before"]


@pytest.mark.parametrize("key, problem", [
    (b"", "KPUB key is empty"),
    (b"k" * 129, "KPUB key is 129 bytes, more than 128"),
    (b"caf\xc3\xa9", "KPUB key has a byte outside printable ASCII (! to ~, no spaces)"),
])
def test_a_bad_key_is_refused_and_nothing_queued(nsqd, topic, key, problem):
    with WireConn(nsqd.tcp_hostport) as conn:
        conn.send(cmd.encode_command(b"KPUB", topic, key, body=b"body"))
        error = conn.error()
        assert (error.code, error.description) == ("E_BAD_KEY", problem)
        conn.expect_closed()
    status, message = post(f"{nsqd.http_url}/kpub?topic={topic}&key={quote(key)}", b"body")
    assert (status, message) == (400, f"INVALID_KEY {problem.removeprefix('KPUB ')}")
    assert post(f"{nsqd.http_url}/kpub?topic={topic}", b"body") == (400, "MISSING_ARG_KEY")
    assert http("POST", f"{nsqd.http_url}/kmpub?topic={topic}", b"no-body-after-the-key\n")[0] == 400
    with WireConn(nsqd.tcp_hostport) as conn:
        conn.send(b"KMPUB %s\n" % topic.encode() + cmd._INT32.pack(10) + cmd._INT32.pack(1) + b"\x00" +
                  cmd._INT32.pack(1) + b"x")
        assert conn.error().code == "E_BAD_KEY"
    _, stats = http_json("GET", f"{nsqd.http_url}/stats?format=json&topic={topic}")
    assert all(t["message_count"] == 0 for t in stats["topics"] or [])


@pytest.mark.parametrize("window", ["-1s", "169h", "soon"])
def test_a_bad_window_is_refused(nsqd, topic, window):
    assert http("POST", f"{nsqd.http_url}/topic/create?topic={topic}")[0] == 200
    assert topic_config(nsqd, topic, publish_key_window=window) == (400, "INVALID_PUBLISH_KEY_WINDOW")


def test_a_topic_without_keys_refuses_keyed_publishes(start_nsqd, topic):
    daemon = start_nsqd("--publish-key-window=0")
    with WireConn(daemon.tcp_hostport) as conn:
        conn.send(keyed.kpub(topic, b"k", b"body"))
        error = conn.error()
        assert error.code == "E_PUB_FAILED"
        assert "takes no keyed publishes (its publish key window is 0)" in error.description
    assert http("POST", f"{daemon.http_url}/kpub?topic={topic}&key=k", b"body")[0] == 400
    assert http_json("GET", f"{daemon.http_url}/stats?format=json&topic={topic}")[1]["topics"][0][
        "message_count"] == 0
    assert topic_config(daemon, topic, publish_key_window="1m")[0] == 200  # a topic can take them all the same
    assert http("POST", f"{daemon.http_url}/kpub?topic={topic}&key=k", b"body")[0] == 200


def test_a_full_window_refuses_new_keys_and_still_answers_repeats(start_nsqd, topic):
    daemon = start_nsqd("--max-publish-keys=3")
    with WireConn(daemon.tcp_hostport) as conn:
        conn.send(keyed.kmpub(topic, [b"a", b"b", b"c"], [b"1", b"2", b"3"]))
        conn.expect_ok()
        kpub(conn, topic, b"b", b"repeat")
        conn.send(keyed.kpub(topic, b"d", b"4"))
        error = conn.error()
        assert error.code == "E_PUB_FAILED" and "--max-publish-keys 3" in error.description
    assert http("POST", f"{daemon.http_url}/kpub?topic={topic}&key=e", b"5")[0] == 503
    assert sorted(received(daemon, topic)) == [b"1", b"2", b"3"]


@pytest.mark.parametrize("flags, message", [
    (("--publish-key-window=-1s",), "--publish-key-window -1s must be in [0, 168h]"),
    (("--publish-key-window=200h",), "--publish-key-window 200h0m0s must be in [0, 168h]"),
    (("--max-publish-keys=0",), "--max-publish-keys 0 must be in [1, "),
])
def test_bad_flags_are_refused_in_one_line(tmp_path, flags, message):
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-m", "nsqpy.cli.nsqd", f"--data-path={tmp_path}", *flags],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


@pytest.mark.skipif(not GO_NSQD.exists(), reason=f"NSQ's nsqd is not at {GO_NSQD} (../shared/reference)")
def test_nsqs_own_nsqd_refuses_a_keyed_publish(tmp_path, topic):
    """A client that sends keys to NSQ's nsqd gets an error, never silent repeats."""
    with nsqd_process(str(tmp_path), executable=str(GO_NSQD)) as go_nsqd:
        with WireConn(go_nsqd.tcp_hostport) as conn:
            conn.send(keyed.kpub(topic, b"k", b"body"))
            error = conn.error()
            assert (error.code, error.description) == ("E_INVALID", "invalid command KPUB")
        assert http("POST", f"{go_nsqd.http_url}/kpub?topic={topic}&key=k", b"body")[0] == 404


def test_a_deleted_topic_forgets_its_keys(nsqd, topic, tmp_path):
    create_channel(nsqd, topic)
    with WireConn(nsqd.tcp_hostport) as conn:
        kpub(conn, topic, b"k", b"first life")
    assert post(f"{nsqd.http_url}/topic/delete?topic={topic}")[0] == 200
    create_channel(nsqd, topic)
    with WireConn(nsqd.tcp_hostport) as conn:
        kpub(conn, topic, b"k", b"second life")
    assert received(nsqd, topic) == [b"second life"]
