"""How soon a durable nsqd delivers after kill -9 and a restart, however much
its data dir holds.

    python bench/restart_bench.py [--records 1000000] [--behind 20000]

A durable channel (--mem-queue-size=0 --sync-every=1) is filled with
``--records`` 200-byte messages; a consumer holds the first one and FINs
``--behind`` messages after it (acknowledged out of order, so the restart
must skip them), then nsqd is killed. The restarted nsqd is timed from its
start to /ping answering, and from there to a new subscriber's first message.
"""

import argparse
import socket
import tempfile
import time
import urllib.request

from nsqpy.localcluster import nsqd_process
from nsqpy.protocol import commands
from nsqpy.protocol.frames import FRAME_TYPE_ERROR, FRAME_TYPE_MESSAGE, FrameReader
from nsqpy.protocol.message import decode_message

FLAGS = ("--mem-queue-size=0", "--sync-every=1", "--msg-timeout=15m")
CHUNK = 10_000


def post(url: str, body: bytes = b"") -> None:
    urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST"), timeout=120).read()


class Subscriber:
    def __init__(self, address: tuple[str, int], rdy: int):
        self.sock = socket.create_connection(address, timeout=120)
        self.reader = FrameReader()
        self.frames: list = []
        self.sock.sendall(b"  V2" + commands.sub("restart", "ch") + commands.rdy(rdy))
        assert self.frame()[1] == b"OK"

    def frame(self) -> tuple[int, bytes]:
        while not self.frames:
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("nsqd closed the connection")
            self.frames.extend(self.reader.feed(data))
        return self.frames.pop(0)

    def message(self):
        while True:
            frame_type, data = self.frame()
            if frame_type == FRAME_TYPE_MESSAGE:
                return decode_message(data)

    def confirm(self) -> None:
        """Every FIN sent so far handled: a FIN nobody holds answers after them."""
        self.sock.sendall(commands.fin(b"0" * 16))
        while self.frame()[0] != FRAME_TYPE_ERROR:
            pass


def ping(url: str) -> bool:
    try:
        return urllib.request.urlopen(f"{url}/ping", timeout=2).status == 200
    except OSError:
        return False


def fill(data: str, records: int, behind: int) -> None:
    with nsqd_process(data, *FLAGS) as daemon:
        post(f"{daemon.http_url}/topic/create?topic=restart")
        post(f"{daemon.http_url}/channel/create?topic=restart&channel=ch")
        body = b"\n".join([b"m" * 200] * CHUNK)
        for start in range(0, records, CHUNK):
            count = min(CHUNK, records - start)
            post(f"{daemon.http_url}/mpub?topic=restart", body if count == CHUNK else b"\n".join([b"m" * 200] * count))
        consumer = Subscriber(daemon.tcp_hostport, 2500)
        consumer.message()  # held
        for _ in range(behind):
            consumer.sock.sendall(commands.fin(consumer.message().id))
        consumer.confirm()
        daemon.process.kill()
        daemon.process.wait(30)


def restart(data: str) -> tuple[float, float]:
    started = time.monotonic()
    with nsqd_process(data, *FLAGS) as daemon:
        while not ping(daemon.http_url):
            time.sleep(0.001)
        answered = time.monotonic()
        Subscriber(daemon.tcp_hostport, 1).message()
        return answered - started, time.monotonic() - answered


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--behind", type=int, default=20_000, help="messages FINished behind the held one")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as data:
        began = time.monotonic()
        fill(data, args.records, args.behind)
        print(f"filled {args.records:,} records, {args.behind:,} FINished behind a held one, "
              f"in {time.monotonic() - began:.1f} s", flush=True)
        to_ping, to_first = restart(data)
    print()
    print("| records on disk | FINished behind a held one | start to /ping | /ping to first delivery |")
    print("|---:|---:|---:|---:|")
    print(f"| {args.records:,} | {args.behind:,} | {to_ping * 1000:.0f} ms | {to_first * 1000:.1f} ms |")


if __name__ == "__main__":
    main()
