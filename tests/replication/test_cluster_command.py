"""``nsqpy cluster --replication-factor 2``: etcd and a replicated cluster
in one command, and what operators see of it (nsqd's /stats and
/metrics, nsqadmin's node API and page)."""

import os
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
        assert "Deprecated" not in (tmp_path / "etcd.log").read_text()  # etcd 3.4's capnslog logger
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
        _, _, text = http("GET", f"{http0}/stats")
        assert re.search(rf"^Replication: node {tcp0} epoch \d+ factor 2 etcd ok takeovers 0 ".encode(), text, re.M)
        assert re.search(rf"^    peer {tcp1} +connected replica sent: 1 ".encode(), text, re.M)
        _, _, text = http("GET", f"{http1}/stats")
        assert re.search(rf"^    holds 1 copies for {tcp0} epoch \d+$".encode(), text, re.M)
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
        _, listed = http_json("GET", f"{admin}/api/nodes")
        brief = {f"{n['broadcast_address']}:{n['tcp_port']}": n["replication"] for n in listed["nodes"]}
        assert [(b["replicas_connected"], b["replication_factor"], b["etcd_ok"], b["held_messages"])
                for b in (brief[tcp0], brief[tcp1])] == [(1, 2, True, 0), (1, 2, True, 1)]
        _, _, page = http("GET", f"{admin}/nodes")
        assert page.count(b"1/1 replicas") == 2 and b"holds 1 copies for others" in page
    finally:
        cluster.signal(signal.SIGTERM)
        assert cluster.wait(60) == 0, cluster.output[-3000:]


def test_a_killed_nsqd_leaves_the_others_running_and_what_it_held_outlives_a_restart(tmp_path, topic):
    """kill -9 of one nsqd of `nsqpy cluster --nsqd 3 --replication-factor 2
    --restart`: one line says so, the others keep running, a survivor
    takes its messages over and the dead one starts again on its ports.
    The whole cluster stopped and started again still holds every message."""
    command = [sys.executable, "-m", "nsqpy.cli.nsqpy", "cluster", "--nsqd", "3", "--replication-factor", "2",
               "--ephemeral-ports", "--no-nsqadmin", "--restart", "--data-path", str(tmp_path)]
    names = [f"{topic[:60]}_{suffix}" for suffix in "ab"]
    cluster = GroupProcess(command)
    try:
        cluster.wait_for("cluster up", timeout=60)
        nsqds = re.findall(r"^nsqd\d\s+pid (\d+)\s+TCP (\S+)\s+HTTP (\S+)", cluster.output, re.M)
        urls = [url for _, _, url in nsqds]
        wait_until(lambda: all(sum(p["connected"] for p in http_json("GET", f"{url}/stats?format=json")[1]
                                   ["replication"]["peers"]) == 2 for url in urls), timeout=30)
        for name in names:
            for url in urls:
                assert http("POST", f"{url}/topic/create?topic={name}")[0] == 200
                assert http("POST", f"{url}/channel/create?topic={name}&channel=ch1")[0] == 200
                assert http("POST", f"{url}/channel/create?topic={name}&channel=ch2")[0] == 200
            for first in range(0, 500, 100):
                assert http("POST", f"{urls[0]}/mpub?topic={name}",
                            b"\n".join(b"m%d" % n for n in range(first, first + 100)))[0] == 200
        os.kill(int(nsqds[0][0]), signal.SIGKILL)
        cluster.wait_for(r"nsqd0 exited with -9; the others keep running \(a survivor delivers the messages "
                         r"it held; it starts again now\)", timeout=30)
        cluster.wait_for(r"nsqd0 started again, pid \d+", timeout=60)
        assert "stopping the others" not in cluster.output
        wait_until(lambda: queued(urls, names) == {(name, channel): 500 for name in names
                                                   for channel in ("ch1", "ch2")}, timeout=60)
    finally:
        cluster.signal(signal.SIGTERM)
        assert cluster.wait(60) == 0, cluster.output[-3000:]
    again = GroupProcess(command)
    try:
        again.wait_for("cluster up", timeout=60)
        urls = re.findall(r"^nsqd\d\s+pid \d+\s+TCP \S+\s+HTTP (\S+)", again.output, re.M)
        assert queued(urls, names) == {(name, channel): 500 for name in names for channel in ("ch1", "ch2")}
    finally:
        again.signal(signal.SIGTERM)
        assert again.wait(60) == 0, again.output[-3000:]


def queued(urls: list[str], names: list[str]) -> dict[tuple[str, str], int]:
    """(topic, channel) -> messages queued on all the nsqd together."""
    found: dict[tuple[str, str], int] = {}
    for url in urls:
        for t in http_json("GET", f"{url}/stats?format=json")[1]["topics"]:
            for c in t["channels"] if t["topic_name"] in names else ():
                key = (t["topic_name"], c["channel_name"])
                found[key] = found.get(key, 0) + c["depth"] + c["in_flight_count"] + c["deferred_count"]
    return found
