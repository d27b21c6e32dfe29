"""nsqadmin as an operator runs it: who may act, who may change /config,
notifications of actions, nodes that fail or do not answer, the static nsqd
list, and the command line."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.nsqadmin.helpers import call, start_cluster
from tests.support.wire import wait_until


def test_admin_user_gates_every_privileged_action(cluster, start_admin, topic):
    admin = start_admin(f"--lookupd-http-address={cluster.lookupd.http_address}",
                        "--admin-user=alice", "--acl-http-header=X-Auth-User")
    actions = [("POST", "/api/topics", {"topic": topic}), ("POST", f"/api/topics/{topic}", {"action": "pause"}),
               ("POST", f"/api/topics/{topic}/c", {"action": "empty"}), ("DELETE", f"/api/topics/{topic}", None),
               ("DELETE", f"/api/topics/{topic}/c", None),
               ("DELETE", f"/api/nodes/{cluster.node(0)}", {"topic": topic})]
    for method, path, body in actions:
        assert call(admin, method, path, body) == (403, {"message": "FORBIDDEN"}), path
        assert call(admin, method, path, body, {"X-Auth-User": "mallory"})[0] == 403, path
    assert topic not in cluster.lookupd_topics()
    assert call(admin, "POST", "/api/topics", {"topic": topic}, {"X-Auth-User": "alice"}) == (200, {"message": ""})
    assert topic in cluster.lookupd_topics()
    assert call(admin, "GET", "/api/topics")[0] == 200  # reading needs no admin


def test_pages_offer_actions_to_admin_users_only(cluster, start_admin, topic):
    cluster.publish(0, topic, b"x")
    cluster.wait_registered(topic, 1)
    admin = start_admin(f"--lookupd-http-address={cluster.lookupd.http_address}", "--admin-user=alice")
    for path in (f"/topics/{topic}", "/lookup"):
        status, page = call(admin, "GET", path)
        assert status == 200 and 'class="action' not in page["text"] and 'id="create"' not in page["text"]
    status, page = call(admin, "GET", f"/topics/{topic}", headers={"X-Forwarded-User": "alice"})
    assert status == 200 and 'data-method="DELETE"' in page["text"] and "Tombstone" in page["text"]
    assert 'id="create"' in call(admin, "GET", "/lookup", headers={"X-Forwarded-User": "alice"})[1]["text"]


def test_config_only_from_the_allowed_cidr(cluster, start_admin):
    lookupd = cluster.lookupd.http_address
    outside = start_admin(f"--lookupd-http-address={lookupd}", "--allow-config-from-cidr=10.0.0.0/8")
    assert call(outside, "GET", "/config/nsqlookupd_http_addresses") == (403, {"message": "FORBIDDEN"})
    assert call(outside, "PUT", "/config/log_level", b"debug") == (403, {"message": "FORBIDDEN"})

    inside = start_admin(f"--lookupd-http-address={lookupd}")
    assert call(inside, "GET", "/config/nsqlookupd_http_addresses") == (200, [lookupd])
    assert call(inside, "GET", "/config/http_client_request_timeout") == (200, 5_000_000_000)
    assert call(inside, "GET", "/config/log_level") == (200, 2)
    assert call(inside, "PUT", "/config/log_level", b"debug") == (200, 1)
    assert call(inside, "GET", "/config/no_such_option") == (400, {"message": "INVALID_OPTION"})
    assert call(inside, "PUT", "/config/http_address", b"x") == (400, {"message": "INVALID_OPTION"})
    assert call(inside, "PUT", "/config/nsqlookupd_http_addresses", b'["nope"]')[0] == 400
    assert call(inside, "PUT", "/config/nsqlookupd_http_addresses", [lookupd, "127.0.0.1:1"]) == \
        (200, [lookupd, "127.0.0.1:1"])
    status, answer = call(inside, "GET", "/api/topics")
    assert status == 200 and answer["message"].startswith("WARNING: ") and "127.0.0.1:1" in answer["message"]


def test_each_action_is_notified(cluster, start_admin, notifications, topic):
    admin = start_admin(f"--lookupd-http-address={cluster.lookupd.http_address}",
                        f"--notification-http-endpoint={notifications.url}")
    cluster.publish(0, topic, b"m")
    cluster.create_channel(0, topic, "ch")
    cluster.wait_registered(topic, 1)
    headers = {"Authorization": "Basic YWxpY2U6c2VjcmV0", "User-Agent": "ops-script/2", "X-Scheme": "https"}
    call(admin, "POST", f"/api/topics/{topic}/ch", {"action": "pause"}, headers)
    call(admin, "POST", f"/api/topics/{topic}", {"action": "empty"})
    call(admin, "POST", "/api/topics", {"topic": topic, "channel": "new"})
    call(admin, "DELETE", f"/api/nodes/{cluster.node(0)}", {"topic": topic})
    wait_until(lambda: len(notifications.received) == 5, timeout=15)
    by_action = {n["action"]: n for n in notifications.received}
    assert set(by_action) == {"pause_channel", "empty_topic", "create_topic", "create_channel",
                              "tombstone_topic_producer"}
    pause = by_action["pause_channel"]
    assert pause["content_type"] == "application/json"
    assert (pause["topic"], pause["channel"], pause["user"], pause["user_agent"]) == (topic, "ch", "alice",
                                                                                     "ops-script/2")
    assert pause["url"] == f"https://{admin.http_address}/api/topics/{topic}/ch"
    assert pause["remote_ip"].startswith("127.0.0.1:") and pause["via"]
    assert abs(pause["timestamp"] - time.time()) < 60
    assert "channel" not in by_action["empty_topic"] and "user" not in by_action["empty_topic"]
    assert by_action["tombstone_topic_producer"]["node"] == cluster.node(0)


def test_a_node_that_does_not_answer_gives_a_warning_in_time(start_admin, tmp_path, topic):
    with contextlib.ExitStack() as stack:
        local = start_cluster(stack, tmp_path)
        for index in (0, 1):
            local.publish(index, topic, b"x")
        local.wait_registered(topic, 2)
        admin = start_admin(f"--lookupd-http-address={local.lookupd.http_address}",
                            "--http-client-request-timeout=1s", "--history-interval=0")
        frozen = local.nsqds[1].process
        os.kill(frozen.pid, signal.SIGSTOP)  # registered with lookupd, but silent
        try:
            for path in (f"/api/topics/{topic}", f"/topics/{topic}", "/api/counter", f"/api/nodes/{local.node(1)}"):
                started = time.monotonic()
                status, answer = call(admin, "GET", path)
                assert time.monotonic() - started < 4, path
                if path == f"/api/nodes/{local.node(1)}":
                    assert status == 502 and answer["message"].startswith("UPSTREAM_ERROR: "), answer
                elif path.startswith("/api/"):
                    assert status == 200 and answer["message"].startswith("WARNING: "), answer
                    assert local.node(1) in answer["message"]
                else:
                    assert status == 200 and "did not answer" in answer["text"]
            assert call(admin, "GET", f"/api/topics/{topic}")[1]["message_count"] == 1
        finally:
            os.kill(frozen.pid, signal.SIGCONT)


def test_no_lookupd_answering_is_upstream_error(start_admin):
    admin = start_admin("--lookupd-http-address=127.0.0.1:1", "--history-interval=0")
    status, answer = call(admin, "GET", "/api/topics")
    assert status == 502 and answer["message"].startswith("UPSTREAM_ERROR: failed to query any nsqlookupd")
    status, page = call(admin, "GET", "/")
    assert status == 502 and "UPSTREAM_ERROR" in page["text"]


def test_static_nsqd_list(cluster, start_admin, topic):
    cluster.publish(0, topic, b"1", b"2")
    cluster.publish(1, topic, b"3")
    admin = start_admin(f"--nsqd-http-address={cluster.nsqds[0].http_address}",
                        f"--nsqd-http-address={cluster.nsqds[1].http_address}")
    assert topic in call(admin, "GET", "/api/topics")[1]["topics"]
    assert call(admin, "GET", "/api/topics?inactive=true") == (200, {"topics": {}, "message": ""})
    status, answer = call(admin, "GET", f"/api/topics/{topic}")
    assert status == 200 and answer["message_count"] == 3 and len(answer["nodes"]) == 2
    nodes = call(admin, "GET", "/api/nodes")[1]["nodes"]
    assert sorted(f"{n['broadcast_address']}:{n['http_port']}" for n in nodes) == sorted(
        [cluster.node(0), cluster.node(1)])
    assert all(n["remote_addresses"] is None for n in nodes)
    assert call(admin, "POST", f"/api/topics/{topic}", {"action": "pause"})[0] == 200
    assert cluster.nsqd_topic(1, topic)["paused"] is True


def test_base_path_prefixes_every_route(cluster, start_admin):
    admin = start_admin(f"--lookupd-http-address={cluster.lookupd.http_address}", "--base-path=/admin/")
    assert call(admin, "GET", "/admin/api/topics")[0] == 200
    assert call(admin, "GET", "/api/topics")[0] == 404
    status, page = call(admin, "GET", "/admin/nodes")
    assert status == 200 and 'href="/admin/static/nsqadmin.css"' in page["text"]


def run_nsqadmin(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nsqpy.cli.nsqadmin", *args], capture_output=True, text=True,
                          timeout=20)


@pytest.mark.parametrize("args, expected", [
    ([], "exactly one of them"),
    (["--lookupd-http-address=127.0.0.1:4161", "--nsqd-http-address=127.0.0.1:4151"], "exactly one of them"),
    (["--lookupd-http-address=nohostport"], "is not host:port"),
    (["--nsqd-http-address=127.0.0.1:4151", "--allow-config-from-cidr=banana"], "is not a CIDR"),
    (["--nsqd-http-address=127.0.0.1:4151", "--http-client-tls-cert=/x.pem"], "must be given together"),
    (["--nsqd-http-address=127.0.0.1:4151", "--http-client-tls-root-ca-file=/no/such/ca.pem"], "TLS"),
    (["--nsqd-http-address=127.0.0.1:4151", "--notification-http-endpoint=example.com/x"], "full http://"),
    (["--nsqd-http-address=127.0.0.1:4151", "--http-address=127.0.0.1:99999"], "out of range (0-65535)"),
])
def test_bad_command_lines_fail_with_one_line(args, expected):
    result = run_nsqadmin(*args)
    assert result.returncode == 1, result
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
    assert "FATAL" in result.stderr.strip().splitlines()[-1]


def test_occupied_port_fails_with_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_nsqadmin("--nsqd-http-address=127.0.0.1:4151", f"--http-address=127.0.0.1:{port}")
    assert result.returncode == 1
    assert "HTTP: listen (127.0.0.1:" in result.stderr and "address already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_version_and_config_file(tmp_path):
    result = run_nsqadmin("--version")
    assert result.returncode == 0 and result.stdout.startswith("nsqadmin v1.3.0 (built w/python")
    config = tmp_path / "nsqadmin.cfg"
    config.write_text('nsqd_http_addresses = ["127.0.0.1:4151"]\nallow_config_from_cidr = "nope"\n')
    result = run_nsqadmin(f"--config={config}")
    assert result.returncode == 1 and "'nope' is not a CIDR" in result.stderr
