"""A replicated cluster on loopback: a real etcd, nsqlookupd, and nsqd with
``--replication-factor``, each on ports of its own that a restart keeps
(a node's name is its broadcast host:port)."""

import base64
import collections
import contextlib
import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from nsqpy.localcluster import DaemonProcess, EtcdProcess, free_port, nsqlookupd_process, replication_secret
from nsqpy.nsqd.replication.replicator import signing_key
from nsqpy.protocol.replication import RAUTH_HELLO, membership_proof, rauth_command
from tests.support.processes import GroupProcess
from tests.support.wire import http, http_json, wait_until

PEERS = Path(__file__).parent / "peers"


class Replicated:
    def __init__(self, stack: contextlib.ExitStack, tmp_path: Path, count: int, factor: int,
                 started: tuple[int, ...] | None = None, nsqd_args: tuple[str, ...] = ()):
        """``count`` nodes, named (host:port) in the order of their index;
        ``started``: the indices started now (all by default)."""
        self.stack = stack
        self.nsqd_args = nsqd_args
        self.tmp_path = tmp_path
        self.factor = factor
        self.secret_file = replication_secret(str(tmp_path))
        self.etcd = stack.enter_context(EtcdProcess(str(tmp_path / "etcd")))
        self.lookupd = stack.enter_context(nsqlookupd_process())
        self.ports = sorted(((free_port(), free_port()) for _ in range(count)), key=lambda ports: str(ports[0]))
        self.nsqds: list[DaemonProcess | None] = [None] * count
        for index in range(count) if started is None else started:
            self.start(index)

    def start(self, index: int, *, empty: bool = False, new_ports: bool = False) -> DaemonProcess:
        """``new_ports``: the node comes back under another address (a new pod IP, another port)."""
        path = self.tmp_path / f"nsqd{index}"
        if empty:
            shutil.rmtree(path, ignore_errors=True)
        path.mkdir(exist_ok=True)
        if new_ports:
            self.ports[index] = (free_port(), free_port())
        tcp, http = self.ports[index]
        daemon = DaemonProcess("nsqd", [
            f"--tcp-address=127.0.0.1:{tcp}", f"--http-address=127.0.0.1:{http}", "--https-address=127.0.0.1:0",
            f"--data-path={path}", "--broadcast-address=127.0.0.1", f"--node-id={index + 1}",
            f"--lookupd-tcp-address={self.lookupd.tcp_address}", f"--replication-factor={self.factor}",
            f"--etcd-endpoint={self.etcd.client_url}", "--replication-lease=3s", "--msg-timeout=10s",
            f"--replication-secret-file={self.secret_file}", *self.nsqd_args,
        ])
        self.stack.enter_context(daemon)
        self.nsqds[index] = daemon
        return daemon

    @property
    def running(self) -> list[DaemonProcess]:
        return [daemon for daemon in self.nsqds if daemon is not None and daemon.process.poll() is None]

    def stats(self, index: int) -> dict:
        status, data = http_json("GET", f"{self.nsqds[index].http_url}/stats?format=json")
        assert status == 200
        return data

    def wait_connected(self, timeout: float = 30) -> None:
        """Every running nsqd has a link to every other one."""
        running = self.running

        def connected():
            return all(sum(p["connected"] for p in self.stats(self.nsqds.index(daemon))["replication"]["peers"])
                       == len(running) - 1 for daemon in running)
        wait_until(connected, timeout=timeout)

    def publisher(self, topic: str, count: int, batch: int = 50) -> GroupProcess:
        return GroupProcess([sys.executable, str(PEERS / "gnsq_spread_publisher.py"), topic, str(count), str(batch),
                             *(d.tcp_address for d in self.running)])

    def reader(self, topic: str, channel: str) -> "Reader":
        process = GroupProcess([sys.executable, str(PEERS / "gnsq_lookupd_reader.py"), topic, channel,
                                f"http://{self.lookupd.http_address}"])
        self.stack.callback(process.kill)
        process.wait_for("reading", timeout=30)
        return Reader(process)

    def create_channel(self, topic: str, channel: str) -> None:
        for daemon in self.running:
            assert http_json("POST", f"{daemon.http_url}/topic/create?topic={topic}")[0] == 200
            assert http_json("POST", f"{daemon.http_url}/channel/create?topic={topic}&channel={channel}")[0] == 200


class Reader:
    """A third-party consumer's handled bodies, as it printed them."""

    def __init__(self, process: GroupProcess):
        self.process = process

    def handled(self) -> collections.Counter:
        return collections.Counter(line.strip() for line in list(self.process.lines)
                                   if line.startswith("m"))

    def wait_for(self, bodies: set[str], timeout: float) -> None:
        def all_there():
            return bodies <= set(self.handled())
        try:
            wait_until(all_there, timeout=timeout)
        except TimeoutError:
            missing = bodies - set(self.handled())
            raise AssertionError(f"{len(missing)} of {len(bodies)} acknowledged messages never handled, "
                                 f"e.g. {sorted(missing)[:5]}") from None


def acknowledged(publisher: GroupProcess) -> set[str]:
    assert publisher.wait(120) == 0, publisher.output[-3000:]
    line = next(line for line in publisher.lines if line.startswith("acknowledged "))
    return {f"m{n}" for n in json.loads(line.removeprefix("acknowledged "))}


@pytest.fixture
def replicated(tmp_path):
    if shutil.which("etcd") is None:
        pytest.fail("etcd not found: `make test` installs Debian's etcd-server")
    with contextlib.ExitStack() as stack:
        yield lambda count=3, factor=2, started=None, nsqd_args=(): Replicated(stack, tmp_path, count, factor,
                                                                                started, nsqd_args)


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=30)


def mpub(daemon, topic: str, numbers: range) -> set[str]:
    assert http("POST", f"{daemon.http_url}/mpub?topic={topic}", b"\n".join(b"m%d" % n for n in numbers))[0] == 200
    return {f"m{n}" for n in numbers}


LOOKS = 2.0  # a node sees a member leave only after its first look at the members (every 0.5 s)


def killed_holding(cluster, index: int, topic: str, count: int = 100) -> tuple[DaemonProcess, int]:
    """Node ``index`` of a connected cluster, killed -9 holding ``count``
    messages of ``topic`` (channel ``ch`` on every node), once every node
    watches the members. -> the dead node and the epoch it died with."""
    time.sleep(LOOKS)
    cluster.create_channel(topic, "ch")
    dead = cluster.nsqds[index]
    mpub(dead, topic, range(count))
    epoch = cluster.stats(index)["replication"]["epoch"]
    dead.kill()
    return dead, epoch


def held_for(cluster, index: int, origin, epoch: int | None = None) -> list[int]:
    """How many copies node ``index`` holds of each epoch of ``origin``
    (of ``epoch`` only, when given)."""
    return [s["messages"] for s in cluster.stats(index)["replication"]["shadows"]
            if s["origin"] == origin.tcp_address and epoch in (None, s["epoch"])]


def cluster_key(cluster) -> bytes:
    """The key members prove membership with, from the cluster's secret file."""
    with open(cluster.secret_file, "rb") as file:
        return signing_key(file.read().strip())


def prove_membership(conn, key: bytes, node: str = "127.0.0.1:1") -> bytes:
    """RAUTH on a WireConn as a member does it (or anyone holding ``key``): -> the nonce answered."""
    conn.send(RAUTH_HELLO)
    nonce = conn.response()
    conn.send(rauth_command(node, membership_proof(key, nonce, node)))
    conn.expect_ok()
    return nonce


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def etcd_call(url: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)
