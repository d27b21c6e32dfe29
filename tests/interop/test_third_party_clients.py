"""pynsq, gnsq and ansq, installed from PyPI, publish and consume through our
nsqd unchanged: PUB, MPUB, DPUB, REQ with the client's backoff, TOUCH past
the msg_timeout. Each runs in its own subprocess (gevent patches the world,
tornado brings its own loop)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nsqpy.localcluster import nsqd_process
from tests.support.auth_server import AuthServer, grant
from tests.support.certs import make_certs
from tests.support.wire import http_json

PEERS = Path(__file__).parent / "peers"
ALL_BODIES = sorted([f"p-{i}" for i in range(10)] + [f"m-{i}" for i in range(10)]
                    + ["deferred", "req-me", "touch-me"])


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def interop_nsqd(tmp_path_factory, certs):
    with nsqd_process(str(tmp_path_factory.mktemp("interop")), "--msg-timeout=2s",
                      f"--tls-cert={certs.server_cert}", f"--tls-key={certs.server_key}") as daemon:
        yield daemon


# ansq 0.3.0 raises NotImplementedError for TLS, snappy and deflate; gnsq
# 1.0.2's Producer breaks on any upgrade, so gnsq upgrades its Consumer only.
FEATURES = ("plain", "snappy", "deflate", "tls", "tls,snappy", "tls,deflate")
COMBINATIONS = [(peer, features) for peer in ("pynsq", "gnsq") for features in FEATURES]
COMBINATIONS.append(("ansq", "plain"))


@pytest.mark.interop
@pytest.mark.parametrize("peer,features", COMBINATIONS)
def test_third_party_client_publishes_and_consumes(interop_nsqd, certs, peer, features):
    topic = f"interop_{peer}_{features.replace(',', '_')}"
    extra = [] if features == "plain" else [features, certs.ca]
    result = subprocess.run([sys.executable, str(PEERS / f"{peer}_peer.py"), interop_nsqd.tcp_address, topic,
                             *extra], capture_output=True, text=True, timeout=90, cwd=PEERS)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    deliveries = report["deliveries"]
    assert report["finished"] == ALL_BODIES, result.stderr[-3000:]
    assert sorted(deliveries) == ALL_BODIES
    assert deliveries["req-me"] == [1, 2]  # requeued once, redelivered with attempts counted
    assert deliveries["touch-me"] == [1]  # touched past the 2 s timeout: never redelivered
    assert all(deliveries[b] == [1] for b in ALL_BODIES if b not in ("req-me",))
    assert report["deferred_after"] >= 0.3 or peer == "gnsq"  # gnsq publishes before consuming

    _, stats = http_json("GET", f"{interop_nsqd.http_url}/stats?format=json&topic={topic}")
    (channel,) = stats["topics"][0]["channels"]
    assert (channel["depth"], channel["in_flight_count"], channel["timeout_count"]) == (0, 0, 0)
    assert channel["requeue_count"] == 1


@pytest.mark.interop
@pytest.mark.parametrize("peer", ["pynsq", "gnsq"])
def test_third_party_client_with_auth(tmp_path, peer):
    server = AuthServer()
    server.grants["interop"] = grant()
    try:
        with nsqd_process(str(tmp_path), "--msg-timeout=2s", f"--auth-http-address={server.address}") as daemon:
            result = subprocess.run([sys.executable, str(PEERS / f"{peer}_peer.py"), daemon.tcp_address,
                                     f"auth_{peer}", "auth"], capture_output=True, text=True, timeout=90, cwd=PEERS)
            assert result.returncode == 0, result.stderr[-3000:]
            assert json.loads(result.stdout)["finished"] == ALL_BODIES
            assert {r["secret"] for r in server.requests} == {"interop"}
    finally:
        server.stop()


@pytest.mark.interop
@pytest.mark.parametrize("peer", ["pynsq"])  # gnsq's Producer cannot upgrade, and a certificate policy requires TLS
def test_third_party_client_with_a_client_certificate_required(tmp_path, certs, peer):
    with nsqd_process(str(tmp_path), "--msg-timeout=2s", f"--tls-cert={certs.server_cert}",
                      f"--tls-key={certs.server_key}", "--tls-client-auth-policy=require-verify",
                      f"--tls-root-ca-file={certs.ca}") as daemon:
        result = subprocess.run([sys.executable, str(PEERS / f"{peer}_peer.py"), daemon.tcp_address,
                                 f"mutual_{peer}", "tls,client_cert", certs.ca, certs.client_cert, certs.client_key],
                                capture_output=True, text=True, timeout=90, cwd=PEERS)
        assert result.returncode == 0, result.stderr[-3000:]
        assert json.loads(result.stdout)["finished"] == ALL_BODIES
