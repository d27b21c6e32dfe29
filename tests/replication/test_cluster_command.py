"""``nsqpy cluster --replication-factor 2``: etcd and a replicated cluster
in one command, and what operators see of it (nsqd's /stats and
/metrics, nsqadmin's node API and page)."""

import re
import signal
import sys

import pytest

from tests.support.processes import GroupProcess
from tests.support.wire import http, http_json, wait_until

pytestmark = pytest.mark.replication


def test_one_command_starts_etcd_and_a_replicated_cluster_that_operators_can_watch(tmp_path, topic):
    cluster = GroupProcess([sys.executable, "-m", "nsqpy.cli.nsqpy", "cluster", "--nsqd", "2",
                            "--replication-factor", "2", "--ephemeral-ports", "--data-path", str(tmp_path)])
    try:
        cluster.wait_for("cluster up", timeout=60)
        assert re.search(r"^etcd\s+pid \d+\s+URL\s+http://127\.0\.0\.1:\d+", cluster.output, re.M)
        nsqds = re.findall(r"^nsqd\d\s+pid \d+\s+TCP (\S+)\s+HTTP (\S+)", cluster.output, re.M)
        admin = re.search(r"nsqadmin at (\S+)/;", cluster.output).group(1)
        (tcp0, http0), (tcp1, http1) = nsqds

        def linked():  # each node has a link up to the other
            return all([peer["connected"] for peer in http_json("GET", f"{url}/stats?format=json")[1]
                        ["replication"]["peers"]] == [True] for url in (http0, http1))
        wait_until(linked, timeout=30)
        assert http("POST", f"{http0}/pub?topic={topic}", b"held twice")[0] == 200

        peer = http_json("GET", f"{http1}/stats?format=json")[1]["replication"]
        assert [(s["origin"], s["messages"]) for s in peer["shadows"]] == [(tcp0, 1)]
        _, _, metrics = http("GET", f"{http0}/metrics")
        assert f'nsqd_replication_peer_connected{{peer="{tcp1}"}} 1.0' in metrics.decode()

        status, node = http_json("GET", f"{admin}/api/nodes/{tcp0.split(':')[0]}:{http0.rsplit(':', 1)[1]}")
        assert status == 200, node
        replication = node["replication"]
        assert replication["replication_factor"] == 2 and replication["etcd_ok"]
        assert [(p["node"], p["connected"], p["replica"], p["sent_messages"]) for p in replication["peers"]] == [
            (tcp1, True, True, 1)]
        _, _, page = http("GET", f"{admin}/nodes/{tcp0.split(':')[0]}:{http0.rsplit(':', 1)[1]}")
        assert b'id="replication-peers"' in page and f'data-peer="{tcp1}"'.encode() in page
    finally:
        cluster.signal(signal.SIGTERM)
        assert cluster.wait(60) == 0, cluster.output[-3000:]
