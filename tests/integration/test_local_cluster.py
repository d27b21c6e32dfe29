"""``nsqpy cluster``: nsqlookupd, N nsqd and nsqadmin in the foreground, stopped together."""

import os
import signal
import subprocess
import sys
import time

from tests.support.processes import CLUSTER_STATUS
from tests.support.wire import http, http_json, wait_until


def start_cluster(tmp_path, nodes: int):
    process = subprocess.Popen([sys.executable, "-m", "nsqpy.cli.nsqpy", "cluster", f"--nsqd={nodes}",
                                f"--data-path={tmp_path}", "--ephemeral-ports"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    daemons = {}
    deadline = time.monotonic() + 60
    while len(daemons) < nodes + 2 and time.monotonic() < deadline:
        match = CLUSTER_STATUS.match(process.stdout.readline())
        if match:
            daemons[match.group(1)] = {"pid": int(match.group(2)), "tcp": match.group(3), "http": match.group(4)}
    assert process.stdout.readline().startswith("cluster up")
    return process, daemons


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_cluster_starts_registers_and_stops_on_ctrl_c(tmp_path):
    process, daemons = start_cluster(tmp_path, nodes=2)
    try:
        assert set(daemons) == {"nsqlookupd", "nsqd0", "nsqd1", "nsqadmin"}
        for name in ("nsqd0", "nsqd1"):
            assert http("POST", f"{daemons[name]['http']}/pub?topic=local", b"x")[0] == 200
        lookup = f"{daemons['nsqlookupd']['http']}/lookup?topic=local"
        wait_until(lambda: len(http_json("GET", lookup)[1].get("producers", [])) == 2)
        admin = daemons["nsqadmin"]["http"].rstrip("/")
        topic = http_json("GET", f"{admin}/api/topics/local")[1]
        assert topic["message_count"] == 2 and len(topic["nodes"]) == 2  # nsqadmin sees the whole cluster
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
        assert "cluster stopped" in process.stdout.read()
        assert not any(alive(d["pid"]) for d in daemons.values())
        assert "persisted 1 messages" in (tmp_path / "nsqd0.log").read_text()
    finally:
        process.kill()


def test_cluster_stops_everything_when_a_node_dies(tmp_path):
    process, daemons = start_cluster(tmp_path, nodes=1)
    try:
        os.kill(daemons["nsqd0"]["pid"], signal.SIGKILL)
        assert process.wait(30) == 1
        assert "nsqd exited" in process.stderr.read()
        wait_until(lambda: not alive(daemons["nsqlookupd"]["pid"]), timeout=30)
    finally:
        process.kill()
