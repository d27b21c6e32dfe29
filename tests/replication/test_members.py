"""Who may speak replication: only connections that proved they are
members (the cluster's secret answering a nonce of their own), over TLS
and beside AUTH where a deployment requires them; and a node is its data
dir, not its address."""

import base64
import subprocess
import sys

import pytest

from nsqpy.protocol.replication import RAUTH_HELLO, RESET, event_record, membership_proof, rauth_command, repl_command
from nsqpy.nsqd.replication.replicator import signing_key
from tests.replication.conftest import cluster_key, etcd_call, held_for, mpub, prove_membership
from tests.support.auth_server import AuthServer, grant
from tests.support.certs import make_certs
from tests.support.wire import WireConn, http, wait_until

pytestmark = pytest.mark.replication

TAKEOVER_WINDOW = 60
CHANNELS = ("ch1", "ch2")


def two_topics(cluster, topic: str) -> list[str]:
    """Two topics with two channels each on every running node."""
    names = [f"{topic[:60]}_{suffix}" for suffix in "ab"]
    for name in names:
        for channel in CHANNELS:
            cluster.create_channel(name, channel)
    return names


def depths(cluster, index: int, names: list[str]) -> dict[tuple[str, str], int]:
    """(topic, channel) -> messages queued there (memory and disk) on node ``index``."""
    return {(t["topic_name"], c["channel_name"]): c["depth"] for t in cluster.stats(index)["topics"]
            if t["topic_name"] in names for c in t["channels"]}


def adopted_everywhere(cluster, names: list[str], count: int, survivors: tuple[int, ...]) -> None:
    """Every channel of ``names`` holds ``count`` messages on one of ``survivors``."""
    wanted = {(name, channel): count for name in names for channel in CHANNELS}
    wait_until(lambda: any(depths(cluster, i, names) == wanted for i in survivors), timeout=TAKEOVER_WINDOW)


@pytest.mark.parametrize("forgery", ["no proof", "no proof, a batch's size and no body",
                                     "wrong secret", "a proof seen on another connection"])
def test_a_forged_repl_changes_nothing_and_a_later_takeover_loses_nothing(replicated, topic, forgery):
    cluster = replicated()
    cluster.wait_connected()
    origin, peer = cluster.nsqds[0], cluster.nsqds[1]
    names = two_topics(cluster, topic)
    sent = set().union(*(mpub(origin, name, range(100)) for name in names))
    assert held_for(cluster, 1, origin) == [200]
    epoch = cluster.stats(0)["replication"]["epoch"]
    key = cluster_key(cluster)
    with WireConn(peer.tcp_hostport) as conn:
        if forgery.startswith("no proof"):
            batch = repl_command(origin.tcp_address, epoch, event_record(RESET, "", ""))
            if forgery != "no proof":  # refused on its line: nsqd buffers nothing for it
                batch = batch[:batch.index(b"\n") + 1] + (32 * 1024 * 1024).to_bytes(4, "big")
            conn.send(batch)
            expected = "REPL before RAUTH: only members of this cluster replicate"
        else:
            if forgery == "wrong secret":
                proof = membership_proof(b"\x00" * 32, b"", origin.tcp_address)
            else:  # what a member sent on the connection it opened, watched on the network
                with WireConn(peer.tcp_hostport) as seen:
                    nonce = prove_membership(seen, key, origin.tcp_address)
                proof = membership_proof(key, nonce, origin.tcp_address)
            conn.send(RAUTH_HELLO)
            conn.response()
            conn.send(rauth_command(origin.tcp_address, proof))
            expected = f"RAUTH from '{origin.tcp_address}' is not proved with this cluster's secret"
        error = conn.error()
        assert (error.code, error.description) == ("E_UNAUTHORIZED", expected)
        conn.expect_closed()
    assert held_for(cluster, 1, origin) == [200]
    origin.kill()
    readers = [cluster.reader(name, channel) for name in names for channel in CHANNELS]
    for reader in readers:
        reader.wait_for(sent, timeout=TAKEOVER_WINDOW)


def test_nothing_an_etcd_reader_sees_proves_membership(replicated, topic):
    """By default the cluster's secret is a file on the nsqd hosts only:
    whoever reads every key in etcd can sign nothing a peer accepts, so
    cannot erase the copies a replica holds."""
    cluster = replicated()
    cluster.wait_connected()
    origin, peer = cluster.nsqds[0], cluster.nsqds[1]
    mpub(origin, topic, range(100))
    everything = etcd_call(cluster.etcd.client_url, "/v3/kv/range", {"key": "AA==", "range_end": "AA=="})["kvs"]
    seen = {base64.b64decode(kv[part]) for kv in everything for part in ("key", "value")}
    assert not any(key.endswith(b"/secret") for key in seen)
    for guess in seen:
        with WireConn(peer.tcp_hostport) as conn:
            conn.send(RAUTH_HELLO)
            nonce = conn.response()
            conn.send(rauth_command(origin.tcp_address, membership_proof(signing_key(guess), nonce,
                                                                         origin.tcp_address)))
            assert conn.error().code == "E_UNAUTHORIZED"
    assert held_for(cluster, 1, origin) == [100]


def test_replication_works_with_tls_required_and_auth(replicated, topic, tmp_path):
    """Peers link over TLS with the cluster's CA on both sides (mutual
    TLS), and a REPL needs no AUTH: its signature says who sent it. A
    client that is not a member gets nowhere without TLS."""
    (tmp_path / "certs").mkdir()
    certs = make_certs(tmp_path / "certs")
    auth = AuthServer()
    try:
        auth.grants["s3cret"] = grant()
        cluster = replicated(nsqd_args=(
            f"--tls-cert={certs.peer_cert}", f"--tls-key={certs.peer_key}", f"--tls-root-ca-file={certs.ca}",
            "--tls-client-auth-policy=require-verify", "--tls-required=tcp-https",
            f"--auth-http-address={auth.address}"))
        cluster.wait_connected()
        origin = cluster.nsqds[0]
        names = two_topics(cluster, topic)
        for name in names:
            mpub(origin, name, range(100))
        assert held_for(cluster, 1, origin) == [200]
        with WireConn(cluster.nsqds[1].tcp_hostport) as conn:
            conn.send(RAUTH_HELLO)
            assert conn.error().description == "cannot RAUTH in current state (TLS required)"
        origin.kill()
        adopted_everywhere(cluster, names, 100, survivors=(1, 2))
    finally:
        auth.stop()


def test_a_second_node_under_a_live_nodes_address_is_refused(replicated, topic, tmp_path):
    cluster = replicated()
    cluster.wait_connected()
    taken = cluster.nsqds[0]
    epoch = cluster.stats(0)["replication"]["epoch"]
    impostor = subprocess.run([
        sys.executable, "-m", "nsqpy.cli.nsqd", "--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0",
        f"--data-path={tmp_path}", "--broadcast-address=127.0.0.1", f"--broadcast-tcp-port={taken.tcp_hostport[1]}",
        "--node-id=9", "--replication-factor=2", "--replication-lease=3s", f"--etcd-endpoint={cluster.etcd.client_url}",
        f"--replication-secret-file={cluster.secret_file}",
    ], capture_output=True, text=True, timeout=60)
    assert impostor.returncode == 1, impostor.stderr
    assert impostor.stderr.strip().splitlines()[-1].endswith(
        f"replicated nsqd {taken.tcp_address} is a member already (node id 1, epoch {epoch}): each nsqd needs an "
        "address of its own (--broadcast-address, --tcp-address)")
    # nothing of the live node changed: it keeps its epoch, and its peers keep taking its copies
    assert cluster.stats(0)["replication"]["epoch"] == epoch
    assert http("POST", f"{taken.http_url}/pub?topic={topic}", b"still the one")[0] == 200
    assert held_for(cluster, 1, taken, epoch) == [1]


def test_a_node_back_under_a_new_address_drops_what_a_survivor_took_over(replicated, topic):
    """Its data dir names the epoch it left, whatever its address now: a
    survivor took it over, so it delivers none of it again."""
    cluster = replicated(nsqd_args=("--mem-queue-size=0",))  # what it accepted outlives kill -9 on disk
    cluster.wait_connected()
    origin = cluster.nsqds[0]
    names = two_topics(cluster, topic)
    for name in names:
        mpub(origin, name, range(100))
    old_address = origin.tcp_address
    origin.kill()
    adopted_everywhere(cluster, names, 100, survivors=(1, 2))
    back = cluster.start(0, new_ports=True)
    assert back.tcp_address != old_address
    back.wait_for_log(rf"epoch \d+ of {old_address} was taken over by \S+: dropped the 400 messages", timeout=30)
    assert sum(depths(cluster, 0, names).values()) == 0
