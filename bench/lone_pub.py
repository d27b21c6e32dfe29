"""PUBs one at a time per nsqd CPU second: ours, Go's, and the floor under
any server written in Python on this host.

    python bench/lone_pub.py [--rounds 3] [--seconds 4] [--paced 2000,8000,15000]
                             [--reference DIR]

NSQ's bench_pub keeps one PUB in flight on each of its two connections, so
every PUB is a round trip: the server reads it, writes an OK that wakes
the publisher, and between PUBs sleeps and is woken. This runs bench_pub,
alternating, against a fresh nsqd of ours (with and without the busy
poll), Go's nsqd 1.3.0 and two servers that answer every read with V2's OK
frame and do nothing else: one on the event loop nsqd runs on (uvloop),
one a bare ``epoll`` loop of ``os.read`` and ``os.write``. The empty
servers are the floor: what the kernel and the interpreter charge a Python
process for a round trip before a byte of a command is looked at.

``--paced`` adds one connection publishing at each of these rates, one PUB
at a time, as an application server with steady traffic does (the pacing
is a busy wait, so the publisher takes a core of its own): what nsqd's CPU
is when it is not the publisher's bottleneck, and what the busy poll costs
then.

Printed per load and server: the medians of PUBs/s, of CPU µs per PUB
(user and system, from /proc), of nsqd's cores and of PUBs per CPU second
as a ratio to Go's nsqd.
"""

import argparse
import asyncio
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from cpu_meter import cpu_times  # bench/ is the script's folder, first on sys.path
from shapes import REFERENCE, Runner

OK_FRAME = (6).to_bytes(4, "big") + (0).to_bytes(4, "big") + b"OK"
MAGIC = b"  V2"
BODY = b"x" * 200
PACED_WARMUP = 1000  # round trips before the measured span
#: each server: (nsqd's kind in shapes.Runner and its flags) or an empty server's loop
SERVERS: dict[str, tuple[str, tuple[str, ...]] | str] = {
    "ours": ("ours", ()),
    "ours --busy-poll=0": ("ours", ("--busy-poll=0",)),
    "go": ("go", ()),
    "empty uvloop": "uvloop",
    "empty epoll": "epoll",
}


def serve_uvloop(listener: socket.socket) -> None:
    import uvloop

    class Answer(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport

        def data_received(self, data):
            if data != MAGIC:
                self.transport.write(OK_FRAME)

    async def main():
        server = await asyncio.get_running_loop().create_server(Answer, sock=listener)
        await server.serve_forever()

    uvloop.run(main())


def serve_epoll(listener: socket.socket) -> None:
    poll = select.epoll()
    poll.register(listener.fileno(), select.EPOLLIN)
    connections: dict[int, socket.socket] = {}
    while True:
        for fd, _ in poll.poll():
            if fd == listener.fileno():
                connection, _ = listener.accept()
                connection.setblocking(False)
                connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                connections[connection.fileno()] = connection
                poll.register(connection.fileno(), select.EPOLLIN)
                continue
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not data:
                poll.unregister(fd)
                connections.pop(fd).close()
            elif data != MAGIC:
                os.write(fd, OK_FRAME)


@contextmanager
def empty_server(kind: str):
    """An empty server in a process of its own: (its pid, its address)."""
    process = subprocess.Popen([sys.executable, __file__, "--serve", kind], stdout=subprocess.PIPE, text=True)
    try:
        port = int(process.stdout.readline())
        yield process.pid, f"127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait(timeout=30)


def pace(address: str, rate: float, seconds: float, pid: int) -> None:
    """Publish one PUB at a time at ``rate`` for ``seconds``; print the PUBs
    and the CPU seconds process ``pid`` spent meanwhile, as JSON."""
    host, _, port = address.rpartition(":")
    connection = socket.create_connection((host, int(port)))
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    connection.sendall(MAGIC)
    pub = b"PUB lone\n" + len(BODY).to_bytes(4, "big") + BODY

    def round_trip() -> None:
        connection.sendall(pub)
        answer = b""
        while len(answer) < len(OK_FRAME):
            answer += connection.recv(64)
        if answer != OK_FRAME:
            raise RuntimeError(f"the server answered {answer!r}, not OK")

    for _ in range(PACED_WARMUP):
        round_trip()
    gap, pubs = 1 / rate, 0
    user, system = cpu_times(pid)
    start = due = time.perf_counter()
    while due - start < seconds:
        while time.perf_counter() < due:
            pass
        round_trip()
        pubs += 1
        due += gap
    elapsed = time.perf_counter() - start
    user_after, system_after = cpu_times(pid)
    print(json.dumps({"pubs": pubs, "seconds": elapsed, "user": user_after - user, "system": system_after - system}))


def bench_pub(runner: Runner, pid: int, address: str, seconds: float) -> dict:
    user, system = cpu_times(pid)
    tool = subprocess.Popen([str(runner.reference / "bench_pub"), f"-nsqd-tcp-address={address}",
                             f"-runfor={seconds}s", "-topic=lone", "-size=200"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _, rate = runner.result(tool)
    user_after, system_after = cpu_times(pid)
    return per_pub(rate * seconds, seconds, user_after - user, system_after - system)


def paced(rate: float):
    def load(runner: Runner, pid: int, address: str, seconds: float) -> dict:
        publisher = subprocess.run([sys.executable, __file__, "--pace", str(rate), "--address", address,
                                    "--seconds", str(seconds), "--pid", str(pid)],
                                   capture_output=True, text=True, timeout=seconds + 120, check=True)
        spent = json.loads(publisher.stdout)
        return per_pub(spent["pubs"], spent["seconds"], spent["user"], spent["system"])

    return load


def per_pub(pubs: float, seconds: float, user: float, system: float) -> dict:
    return {"rate": pubs / seconds, "cpu_us": (user + system) * 1e6 / pubs, "user_us": user * 1e6 / pubs,
            "system_us": system * 1e6 / pubs, "cores": (user + system) / seconds}


def measure(runner: Runner, server: str, load, seconds: float) -> dict:
    setting = SERVERS[server]
    if isinstance(setting, str):
        with empty_server(setting) as (pid, address):
            return load(runner, pid, address, seconds)
    kind, flags = setting
    return runner.measure(kind, ("--mem-queue-size=10000000", *flags),
                          lambda daemon: load(runner, daemon.process.pid, daemon.tcp_address, seconds))


def table(runner: Runner, title: str, load, servers: list[str], rounds: int, seconds: float) -> None:
    samples: dict[str, list[dict]] = {server: [] for server in servers}
    for _ in range(rounds):
        for server in servers:
            samples[server].append(measure(runner, server, load, seconds))
    medians = {server: {key: statistics.median(s[key] for s in runs) for key in runs[0]}
               for server, runs in samples.items()}
    print(f"\n## {title} (median of {rounds})\n")
    print("| server | PUBs/s | CPU µs/PUB | user | system | nsqd cores | PUBs per CPU s, /Go's |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for server, values in medians.items():
        print(f"| {server} | {values['rate']:,.0f} | {values['cpu_us']:.2f} | {values['user_us']:.2f} | "
              f"{values['system_us']:.2f} | {values['cores']:.2f} | "
              f"{medians['go']['cpu_us'] / values['cpu_us']:.2f}× |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the servers (default 3)")
    parser.add_argument("--seconds", type=float, default=4, help="each load's run against each (default 4)")
    parser.add_argument("--paced", default="", help="comma-separated PUBs/s of one paced connection")
    parser.add_argument("--reference", type=Path, default=REFERENCE, help="folder of NSQ's Go binaries")
    parser.add_argument("--serve", choices=("uvloop", "epoll"), help=argparse.SUPPRESS)
    parser.add_argument("--pace", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        listener = socket.create_server(("127.0.0.1", 0))
        print(listener.getsockname()[1], flush=True)
        (serve_uvloop if args.serve == "uvloop" else serve_epoll)(listener)
        return
    if args.pace:
        pace(args.address, args.pace, args.seconds, args.pid)
        return
    if not (args.reference / "bench_pub").exists():
        parser.error(f"no bench_pub in {args.reference} (--reference)")
    runner = Runner(args.reference, pure=False)
    table(runner, "bench_pub", bench_pub, list(SERVERS), args.rounds, args.seconds)
    for rate in (float(text) for text in args.paced.split(",") if text):
        nsqd_only = [server for server, setting in SERVERS.items() if not isinstance(setting, str)]
        table(runner, f"one connection paced at {rate:,.0f} PUBs/s", paced(rate), nsqd_only, args.rounds,
              args.seconds)


if __name__ == "__main__":
    main()
