"""Publish as fast as --connections connections allow (default: one per CPU):
MPUB of --batch-size messages per round trip (PUB when --batch-size is 1),
the command built once, as NSQ's bench_writer does."""

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import hostport, parser, report  # noqa: E402

from nsqpy.protocol import commands  # noqa: E402
from nsqpy.protocol.frames import MAGIC_V2, OK_FRAME, FrameReader  # noqa: E402


def publish_worker(address: str, command: bytes, batch_size: int, deadline: float, counts: list, slot: int):
    sock = socket.create_connection(hostport(address))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(MAGIC_V2)
    reader = FrameReader()
    sent = 0
    while time.perf_counter() < deadline:
        sock.sendall(command)
        data = sock.recv(64)
        if data != OK_FRAME:  # a heartbeat arrived too, or a partial read
            frames = reader.feed(data)
            while not any(frame == (0, b"OK") for frame in frames):
                for frame_type, payload in frames:
                    if frame_type == 1:
                        raise SystemExit(f"bench_writer: {payload.decode()}")
                frames = reader.feed(sock.recv(64))
        sent += batch_size
    sock.close()
    counts[slot] = sent


def main(argv=None) -> dict:
    args = parser("bench_writer", batch_size=200, connections=os.cpu_count() or 1).parse_args(argv)
    body = b"a" * args.size
    if args.batch_size == 1:
        command = commands.pub(args.topic, body)
    else:
        command = commands.mpub(args.topic, [body] * args.batch_size)
    counts = [0] * args.connections
    started = time.perf_counter()
    deadline = started + args.runfor
    # one connection per CPU like NSQ's bench_writer; blocking socket calls release the GIL
    workers = [threading.Thread(target=publish_worker,
                                args=(args.tcp_address, command, args.batch_size, deadline, counts, i))
               for i in range(args.connections)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return report("bench_writer", sum(counts), args.size, time.perf_counter() - started)


if __name__ == "__main__":
    print(json.dumps(main()))
