"""Starting a replicated nsqd: one clear line for what cannot work, and
what it does when etcd is not there yet."""

import contextlib
import json
import socket
import struct
import subprocess
import sys
import threading

import pytest

from nsqpy.localcluster import nsqd_process
from nsqpy.protocol.replication import repl_command
from tests.replication.conftest import b64, cluster_key, etcd_call, prove_membership
from tests.support.wire import WireConn, http, http_json, wait_until

pytestmark = pytest.mark.replication


def nsqd_exits(tmp_path, *flags: str) -> str:
    result = subprocess.run([sys.executable, "-m", "nsqpy.cli.nsqd", f"--data-path={tmp_path}",
                             "--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0", *flags],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode in (1, 2), result.stderr  # a bad value (2, as Go's flag package), or FATAL (1)
    return result.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("flags, line", [
    (("--replication-factor=2",), "--replication-factor above 1 needs --etcd-endpoint"),
    (("--replication-factor=2", "--etcd-endpoint=http://127.0.0.1:1"),
     "--replication-factor above 1 needs --replication-secret-file (the same file on every nsqd, e.g. the output "
     "of `openssl rand -hex 32`), or --replication-secret-in-etcd to keep one in etcd, where whoever can read "
     "etcd has it"),
    (("--replication-factor=4", "--etcd-endpoint=http://127.0.0.1:1"), "--replication-factor 4 must be 1, 2 or 3"),
    (("--replication-factor=2", "--etcd-endpoint=http://127.0.0.1:1", "--replication-ack=tape"),
     "--replication-ack: 'tape' is not one of memory, disk"),
])
def test_what_cannot_work_is_one_line(tmp_path, flags, line):
    assert line in nsqd_exits(tmp_path, *flags)


def test_a_second_nsqd_with_the_same_node_id_is_refused(replicated, tmp_path):
    cluster = replicated(count=1, factor=2)
    first = cluster.nsqds[0]
    line = nsqd_exits(tmp_path, "--node-id=1", "--replication-factor=2", f"--etcd-endpoint={cluster.etcd.client_url}",
                      "--broadcast-address=127.0.0.1", f"--replication-secret-file={cluster.secret_file}")
    assert f"--node-id 1 is also the node id of replicated nsqd {first.tcp_address}" in line


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:1", "https://127.0.0.1:1"])
def test_without_etcd_it_starts_and_refuses_publishes_it_cannot_copy(tmp_path, topic, endpoint):
    """No copy can be made: a publish gets an error a publisher may
    retry (HTTP 503, E_PUB_FAILED and E_MPUB_FAILED over TCP), nothing is
    queued, and /ping says why."""
    with nsqd_process(str(tmp_path), "--replication-factor=2", f"--etcd-endpoint={endpoint}",
                      "--replication-secret-in-etcd") as nsqd:
        nsqd.wait_for_log("REPLICATION: etcd unavailable .*refusing publishes with E_PUB_FAILED")
        status, _, body = http("POST", f"{nsqd.http_url}/pub?topic={topic}", b"alone")
        assert (status, json.loads(body)["message"]) == (
            503, "PUB_FAILED replication: not a member of the cluster (etcd not reached)")
        with WireConn(nsqd.tcp_hostport) as conn:
            conn.send(b"PUB %s\n%s%s" % (topic.encode(), len(b"alone").to_bytes(4, "big"), b"alone"))
            error = conn.error()
            assert (error.code, error.description) == (
                "E_PUB_FAILED", "PUB failed replication: not a member of the cluster (etcd not reached)")
        status, _, body = http("GET", f"{nsqd.http_url}/ping")
        assert (status, body) == (500, b"NOK - replication: not a member of the cluster (etcd not reached)")
        stats = http_json("GET", f"{nsqd.http_url}/stats?format=json")[1]
        assert stats["replication"]["etcd_ok"] is False
        assert all(t["depth"] == 0 and t["message_count"] == 0 for t in stats["topics"])
        wait_until(lambda: "etcd unavailable" in nsqd.output.split("listening on")[-1], timeout=30)


def test_an_operator_may_accept_publishes_with_fewer_copies(tmp_path, topic):
    """--replication-min-copies=1: Kafka's min.insync.replicas=1, by choice;
    each message acknowledged with fewer copies is counted once."""
    with nsqd_process(str(tmp_path), "--replication-factor=3", "--replication-min-copies=1",
                      "--etcd-endpoint=http://127.0.0.1:1", "--replication-secret-in-etcd") as nsqd:
        nsqd.wait_for_log("REPLICATION: etcd unavailable .*accepting publishes with fewer copies")
        assert http("POST", f"{nsqd.http_url}/mpub?topic={topic}", b"one\ntwo")[0] == 200
        replication = http_json("GET", f"{nsqd.http_url}/stats?format=json")[1]["replication"]
        assert replication["under_replicated_messages"] == 2
        assert http("GET", f"{nsqd.http_url}/ping")[2] == b"OK"


@pytest.mark.parametrize("flags, line", [
    (("--replication-min-copies=3",), "--replication-min-copies 3 must be in [1, --replication-factor 2]"),
    (("--etcd-endpoint=htp//127.0.0.1:2379",), "--etcd-endpoint 'htp//127.0.0.1:2379' is not an etcd client URL"),
    (("--replication-secret-file=/nonexistent/secret",), "--replication-secret-file: cannot read /nonexistent/secret"),
])
def test_replication_flags_that_cannot_work_are_one_line(tmp_path, flags, line):
    assert line in nsqd_exits(tmp_path, "--replication-factor=2", "--etcd-endpoint=http://127.0.0.1:1",
                              "--replication-secret-in-etcd", *flags)


def test_repl_is_an_unknown_command_to_an_nsqd_that_does_not_replicate(nsqd):
    with WireConn(nsqd.tcp_hostport) as conn:
        conn.send(repl_command("127.0.0.1:4150", 7, b""))
        error = conn.error()
        assert (error.code, error.description) == ("E_INVALID", "invalid command REPL")
        conn.expect_closed()


@pytest.mark.parametrize("origin, epoch, payload, refusal", [
    ("../../escape:1", 7, b"", "origin '../../escape:1' epoch 7 is no node's"),
    ("10.0.0.9:4150", 7, b"F\x00\x01t\x00\x02ch\xff\xff\xff\xff", "4294967295 ids in a record"),
    ("10.0.0.9:4150", 7, b"Q\x00\x01t", "unknown record kind"),
])
def test_a_batch_that_does_not_parse_closes_its_link_and_changes_nothing(replicated, topic, origin, epoch, payload,
                                                                          refusal):
    cluster = replicated(count=1, factor=2)
    node = cluster.nsqds[0]
    with WireConn(node.tcp_hostport) as conn:
        prove_membership(conn, cluster_key(cluster))
        conn.send(repl_command(origin, epoch, payload))
        error = conn.error()
        assert error.code == "E_BAD_BODY" and refusal in error.description
        conn.expect_closed()
    assert cluster.stats(0)["replication"]["shadows"] == []
    assert not (cluster.tmp_path / "nsqd0" / "replication").exists() or not any(
        (cluster.tmp_path / "nsqd0" / "replication").iterdir())
    assert http("GET", f"{node.http_url}/stats")[0] == 200  # still serving


def test_a_member_that_never_answers_holds_a_publish_no_longer_than_a_lease(replicated, topic):
    """A peer that keeps its etcd lease and proved it is a member, but
    answers no batch (a disk whose fsync hangs): its link goes after a
    lease's time, and the publish is answered with an error its publisher
    may retry."""
    cluster = replicated(count=1, factor=2)
    node = cluster.nsqds[0]
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        accepted = []

        def prove_then_say_nothing() -> None:
            with contextlib.suppress(OSError):  # the listening socket closed at the test's end
                conn = silent.accept()[0]
                accepted.append(conn)
                seen = b""
                # RAUTH asks for a nonce, then RAUTH <node> <proof>: a line each, answered in turn
                for lines, answer in ((1, b"%032x" % 7), (2, b"OK")):
                    while seen.count(b"\n") < lines:
                        seen += conn.recv(4096)
                    conn.sendall(struct.pack(">ii", 4 + len(answer), 0) + answer)
                while conn.recv(65536):
                    pass

        threading.Thread(target=prove_then_say_nothing, daemon=True).start()
        name = f"127.0.0.1:{silent.getsockname()[1]}"
        etcd = cluster.etcd.client_url
        lease = etcd_call(etcd, "/v3/lease/grant", {"TTL": 60})["ID"]
        etcd_call(etcd, "/v3/kv/put", {"key": b64(f"/nsqpy/members/{name}"), "lease": lease,
                                        "value": b64(json.dumps({"tcp": name, "node_id": 99, "epoch": int(lease)}))})
        wait_until(lambda: any(p["node"] == name and p["connected"]
                               for p in cluster.stats(0)["replication"]["peers"]), timeout=30)
        status, _, body = http("POST", f"{node.http_url}/pub?topic={topic}", b"waits a lease at most", timeout=30)
        assert (status, json.loads(body)["message"]) == (503, "PUB_FAILED replication: 1 of 2 copies could be made")
        assert cluster.stats(0)["replication"]["under_replicated_messages"] == 1
        node.wait_for_log(f"peer {name} has not answered for 3s: closing its link")
        for conn in accepted:
            conn.close()


def test_a_topic_made_retained_unreplicated_is_refused_at_a_replicated_start(tmp_path, topic):
    """As retention.md says: the combination is refused in one line at start,
    not only over /topic/config."""
    with nsqd_process(str(tmp_path)) as unreplicated:
        assert http("POST", f"{unreplicated.http_url}/topic/create?topic={topic}")[0] == 200
        assert http("POST", f"{unreplicated.http_url}/topic/config?topic={topic}&retention=24h")[0] == 200
    line = nsqd_exits(tmp_path, "--replication-factor=2", "--etcd-endpoint=http://127.0.0.1:1",
                      "--replication-secret-in-etcd")
    assert f"topic {topic} is retained (nsqd.dat) and --replication-factor is above 1" in line
