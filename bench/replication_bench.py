"""What replication costs, and how fast a dead nsqd is taken over.

    python bench/replication_bench.py [--runfor 5] [--rounds 2] [--kills 20] [--backlog 1000000]

Publishing: bench_writer (MPUB of 200, then PUB) against one nsqd alone
(R=1), against the same nsqd with --replication-factor=2 and one peer, and
with --replication-ack=disk too, alternating them in each round; then one connection PUBbing one
message at a time measures the PUB round trip (p50, p99).
Takeover: three nsqd (R=2), a topic with a channel and messages published
on one node while raw consumers (RDY, no FIN) hold a connection to the
others; the node is SIGKILLed, and the time to the first message a
survivor delivers is taken, --kills times (the node restarts in between).
Memory: --backlog messages of 200 B published on one of two nsqd (R=2), two
topics with two channels each, and the resident memory of the origin and of
the peer that holds the copies: the peer at the default --mem-queue-size
(bodies past 10,000 per topic on disk) and at one past the backlog (all in
memory).
Needs etcd (Debian's etcd-server; `make test` installs it).
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

from nsqpy.localcluster import DaemonProcess, EtcdProcess, free_port, nsqd_process, replication_secret
from nsqpy.protocol import commands
from nsqpy.protocol.frames import FRAME_TYPE_MESSAGE, MAGIC_V2, OK_FRAME, FrameReader

HERE = Path(__file__).parent


def post(url: str, body: bytes | None = None) -> bytes:
    return urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST"), timeout=30).read()


def writer(address: str, runfor: str, batch: str, topic: str) -> float:
    out = subprocess.run([sys.executable, str(HERE / "bench_writer.py"), "--tcp-address", address, "--runfor",
                          runfor, "--batch-size", batch, "--topic", topic], capture_output=True, text=True,
                         check=True, timeout=600)
    return json.loads(out.stdout.splitlines()[-1])["rate"]


def pub_round_trips(address: str, topic: str, count: int = 5000) -> list[float]:
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(MAGIC_V2)
    command = commands.pub(topic, b"x" * 200)
    times = []
    for _ in range(count):
        began = time.perf_counter()
        sock.sendall(command)
        if sock.recv(64) != OK_FRAME:
            raise SystemExit("PUB was not answered OK")
        times.append(time.perf_counter() - began)
    sock.close()
    return times


def replicated_nsqd(stack: ExitStack, data: str, etcd: EtcdProcess, index: int, ports=None,
                    ack: str = "memory", extra: tuple[str, ...] = ()) -> DaemonProcess:
    path = os.path.join(data, f"nsqd{index}")
    os.makedirs(path, exist_ok=True)
    tcp, http = ports or (0, 0)
    return stack.enter_context(DaemonProcess("nsqd", [
        f"--tcp-address=127.0.0.1:{tcp}", f"--http-address=127.0.0.1:{http}", "--https-address=127.0.0.1:0",
        f"--data-path={path}", "--broadcast-address=127.0.0.1", f"--node-id={index + 1}",
        "--replication-factor=2", f"--etcd-endpoint={etcd.client_url}", "--replication-lease=3s",
        f"--replication-ack={ack}", f"--replication-secret-file={replication_secret(data)}", *extra,
    ]))


def wait_peers(daemon: DaemonProcess, count: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        stats = json.loads(urllib.request.urlopen(f"{daemon.http_url}/stats?format=json").read())
        if sum(p["connected"] for p in stats["replication"]["peers"]) >= count:
            return
        time.sleep(0.1)
    raise SystemExit(f"{daemon.tcp_address} did not connect to {count} peers")


MODES = ("R=1", "R=2", "R=2, ack disk")


def publishing(args, data: str, etcd: EtcdProcess, mode: str, rows: dict) -> None:
    with ExitStack() as stack:
        if mode == "R=1":
            target = stack.enter_context(nsqd_process(os.path.join(data, f"alone{time.monotonic_ns()}")))
        else:
            path = os.path.join(data, f"r{time.monotonic_ns()}")
            ack = "disk" if "disk" in mode else "memory"
            nodes = [replicated_nsqd(stack, path, etcd, i, ack=ack) for i in (0, 1)]
            target = nodes[0]
            wait_peers(target, 1)
        post(f"{target.http_url}/topic/create?topic=bench")
        post(f"{target.http_url}/channel/create?topic=bench&channel=offline")
        for kind, batch in (("MPUB 200", "200"), ("PUB", "1")):
            rows.setdefault((kind, mode), []).append(writer(target.tcp_address, args.runfor, batch, "bench"))
        times = sorted(pub_round_trips(target.tcp_address, "bench"))
        rows.setdefault(("PUB p50 ms", mode), []).append(statistics.median(times) * 1000)
        rows.setdefault(("PUB p99 ms", mode), []).append(times[int(len(times) * 0.99)] * 1000)


def first_message(socks: list[socket.socket], timeout: float) -> float:
    """Seconds until any of ``socks`` (subscribed, RDY given) gets a message."""
    for sock in socks:
        sock.setblocking(False)
    readers = [FrameReader() for _ in socks]
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        for sock, reader in zip(socks, readers):
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            if any(frame_type == FRAME_TYPE_MESSAGE for frame_type, _ in reader.feed(data)):
                return time.monotonic() - began
        time.sleep(0.001)
    raise SystemExit(f"no message delivered within {timeout}s of the kill")


def takeovers(args, data: str, etcd: EtcdProcess) -> list[float]:
    ports = [(free_port(), free_port()) for _ in range(3)]
    times = []
    with ExitStack() as stack:
        nodes = [replicated_nsqd(stack, data, etcd, i, ports[i]) for i in range(3)]
        for kill in range(args.kills):
            for node in nodes:
                wait_peers(node, 2)
            victim = nodes[1]
            post(f"{victim.http_url}/topic/create?topic=takeover")
            post(f"{victim.http_url}/channel/create?topic=takeover&channel=ch")
            post(f"{victim.http_url}/mpub?topic=takeover", b"\n".join(b"m%d" % i for i in range(100)))
            socks = []
            for survivor in (nodes[0], nodes[2]):
                host, _, port = survivor.tcp_address.rpartition(":")
                sock = stack.enter_context(socket.create_connection((host, int(port))))
                sock.sendall(MAGIC_V2 + commands.sub("takeover", "ch") + commands.rdy(1000))
                socks.append(sock)
            time.sleep(0.2)
            victim.kill()
            times.append(first_message(socks, 30))
            for sock in socks:
                sock.close()
            print(f"takeover {kill + 1}: {times[-1] * 1000:.0f} ms", flush=True)
            nodes[1] = replicated_nsqd(stack, data, etcd, 1, ports[1])
            for survivor in (nodes[0], nodes[2]):  # what was taken over goes, for the next round
                post(f"{survivor.http_url}/topic/delete?topic=takeover")
    return times


def stats(daemon: DaemonProcess) -> dict:
    return json.loads(urllib.request.urlopen(f"{daemon.http_url}/stats?format=json", timeout=60).read())


def resident_mb(daemon: DaemonProcess) -> float:
    with open(f"/proc/{daemon.process.pid}/status") as status:
        kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return kb / 1024


def backlog_memory(count: int, data: str, etcd: EtcdProcess, peer_memory: int | None) -> tuple[float, float, int]:
    """(origin MB, peer MB, peer's bytes on disk) once the peer holds ``count`` copies."""
    extra = () if peer_memory is None else (f"--mem-queue-size={peer_memory}",)
    with ExitStack() as stack:
        path = os.path.join(data, f"m{time.monotonic_ns()}")
        origin = replicated_nsqd(stack, path, etcd, 0)
        peer = replicated_nsqd(stack, path, etcd, 1, extra=extra)
        wait_peers(origin, 1)
        topics = ("backlog_a", "backlog_b")
        for topic in topics:
            post(f"{origin.http_url}/topic/create?topic={topic}")
            for channel in ("ch1", "ch2"):
                post(f"{origin.http_url}/channel/create?topic={topic}&channel={channel}")
        host, _, port = origin.tcp_address.rpartition(":")
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(MAGIC_V2)
            for first in range(0, count, 5000):
                sock.sendall(commands.mpub(topics[first // 5000 % 2], [b"x" * 200] * min(5000, count - first)))
                if sock.recv(64) != OK_FRAME:
                    raise SystemExit("MPUB was not answered OK")
        shadow = next(s for s in stats(peer)["replication"]["shadows"])
        if shadow["messages"] != count:
            raise SystemExit(f"the peer holds {shadow['messages']} copies of {count}")
        return resident_mb(origin), resident_mb(peer), shadow["spilled_bytes"]


def print_publishing(rows: dict) -> None:
    print()
    print(f"| write | {' | '.join(MODES)} | {' | '.join(m + ' / R=1' for m in MODES[1:])} |")
    print("|---|" + "---:|" * (2 * len(MODES) - 1))
    for kind in ("MPUB 200", "PUB", "PUB p50 ms", "PUB p99 ms"):
        values = [statistics.median(rows[(kind, mode)]) for mode in MODES]
        shown = [f"{v:,.2f}" if "ms" in kind else f"{v:,.0f}" for v in values]
        print(f"| {kind} | {' | '.join(shown)} | {' | '.join(f'{v / values[0]:.2f}' for v in values[1:])} |")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runfor", default="5")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--backlog", type=int, default=0, help="messages held, for the memory table (0: none)")
    args = p.parse_args()
    rows: dict = {}
    with tempfile.TemporaryDirectory() as data, EtcdProcess(os.path.join(data, "etcd")) as etcd:
        for _ in range(args.rounds):
            for mode in MODES:
                publishing(args, data, etcd, mode, rows)
        if rows:
            print_publishing(rows)
        if args.backlog:
            print(f"\n| {args.backlog:,} x 200 B held | origin MB | peer MB | peer's bodies on disk MB |")
            print("|---|---:|---:|---:|")
            for label, peer_memory in (("peer at --mem-queue-size 10000", None),
                                       ("peer with all in memory", args.backlog + 1)):
                origin_mb, peer_mb, spilled = backlog_memory(args.backlog, data, etcd, peer_memory)
                print(f"| {label} | {origin_mb:,.0f} | {peer_mb:,.0f} | {spilled / 2 ** 20:,.0f} |", flush=True)
        if args.kills:
            times = sorted(takeovers(args, data, etcd))
            print(f"\ntakeover, kill -9 to first redelivered message, {len(times)} kills: "
                  f"p50 {statistics.median(times) * 1000:.0f} ms, "
                  f"p99 {times[min(len(times) - 1, int(len(times) * 0.99))] * 1000:.0f} ms")


if __name__ == "__main__":
    main()
