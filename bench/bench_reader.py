"""Consume as fast as one connection allows with RDY --rdy, FINishing every
message (FINs for one read of the socket go out in one write), as NSQ's
bench_reader does."""

import json
import socket
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import hostport, parser, report  # noqa: E402

from nsqpy.protocol import commands  # noqa: E402
from nsqpy.protocol.frames import FRAME_TYPE_ERROR, FRAME_TYPE_MESSAGE, MAGIC_V2  # noqa: E402

_HEADER = struct.Struct(">ii")


def main(argv=None) -> dict:
    args = parser("bench_reader", channel="ch", rdy=2500).parse_args(argv)
    sock = socket.create_connection(hostport(args.tcp_address))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(MAGIC_V2 + commands.sub(args.topic, args.channel) + commands.rdy(args.rdy))
    sock.settimeout(1.0)
    buffer = b""
    received = 0
    started = last = None
    deadline = None
    unpack_from = _HEADER.unpack_from
    while deadline is None or time.perf_counter() < deadline:
        try:
            data = sock.recv(1 << 20)
        except socket.timeout:
            if started is not None:
                break  # drained
            continue
        if not data:
            break
        if started is None:
            started = time.perf_counter()
            deadline = started + args.runfor
        buffer = buffer + data if buffer else data
        pos, end = 0, len(buffer)
        fins = []
        while end - pos >= 8:
            size, frame_type = unpack_from(buffer, pos)
            if end - pos - 4 < size:
                break
            if frame_type == FRAME_TYPE_MESSAGE:
                fins.append(b"FIN " + buffer[pos + 18:pos + 34] + b"\n")
            elif frame_type == FRAME_TYPE_ERROR:
                raise SystemExit(f"bench_reader: {buffer[pos + 8:pos + 4 + size].decode()}")
            elif buffer[pos + 8:pos + 4 + size] == b"_heartbeat_":
                fins.append(commands.NOP)
            pos += 4 + size
        buffer = buffer[pos:]
        if fins:
            received += len(fins)
            sock.sendall(b"".join(fins))
            last = time.perf_counter()
    elapsed = (last - started) if started else 0.0
    sock.close()
    return report("bench_reader", received, args.size, elapsed)


if __name__ == "__main__":
    print(json.dumps(main()))
