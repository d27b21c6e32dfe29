"""1,000,000 messages of 1 KiB for a channel whose consumer is away: nsqd's
memory stays bounded by --mem-queue-size (10,000 messages, about 12 MB of
messages), the rest goes to disk, and all of it is delivered afterwards,
in order within what was kept in memory and within what went to disk."""

import socket
import struct

from nsqpy.protocol import commands as cmd
from nsqpy.protocol.frames import MAGIC_V2
from tests.support.wire import WireConn, http, http_json

TOTAL = 1_000_000
BATCH = 500
RSS_BOUND = 200 * 1024 * 1024  # baseline interpreter + 10,000 queued messages, with room to spare


def rss(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def consume_all(daemon, count: int) -> list[int]:
    """Sequence numbers in arrival order, FINing everything (a lean reader: 1M frames)."""
    sock = socket.create_connection(daemon.tcp_hostport, timeout=60)
    sock.sendall(MAGIC_V2 + cmd.sub("big", "offline") + cmd.rdy(2500))
    order, buffer = [], b""
    while len(order) < count:
        data = sock.recv(1 << 20)
        assert data, "connection closed"
        buffer += data
        pos, fins = 0, []
        while len(buffer) - pos >= 8:
            size, frame_type = struct.unpack_from(">ii", buffer, pos)
            if len(buffer) - pos - 4 < size:
                break
            if frame_type == 2:
                fins.append(b"FIN " + buffer[pos + 18:pos + 34] + b"\n")
                order.append(int(buffer[pos + 34:pos + 42]))
            elif frame_type == 1:
                raise AssertionError(buffer[pos + 8:pos + 4 + size])
            pos += 4 + size
        buffer = buffer[pos:]
        if fins:
            sock.sendall(b"".join(fins))
    sock.close()
    return order


def test_a_million_messages_for_an_offline_consumer_stay_on_disk(start_nsqd):
    daemon = start_nsqd("--max-bytes-per-file=67108864")
    assert http("POST", f"{daemon.http_url}/topic/create?topic=big")[0] == 200
    assert http("POST", f"{daemon.http_url}/channel/create?topic=big&channel=offline")[0] == 200
    baseline = rss(daemon.process.pid)
    filler = b"." * (1024 - 8)
    with WireConn(daemon.tcp_hostport, timeout=30) as c:
        for start in range(0, TOTAL, BATCH):
            c.send(cmd.mpub("big", [b"%08d" % i + filler for i in range(start, start + BATCH)]))
            c.expect_ok()
    peak = rss(daemon.process.pid)
    _, stats = http_json("GET", f"{daemon.http_url}/stats?format=json&topic=big")
    channel = stats["topics"][0]["channels"][0]
    assert (channel["depth"], channel["backend_depth"], channel["memory_depth"]) == (TOTAL, TOTAL - 10_000, 10_000)
    assert peak - baseline < RSS_BOUND, f"RSS grew by {(peak - baseline) >> 20} MiB"
    print(f"\nRSS: {baseline >> 20} MiB before, {peak >> 20} MiB after {TOTAL} x 1 KiB")

    order = consume_all(daemon, TOTAL)
    assert sorted(order) == list(range(TOTAL))  # complete, no duplicates
    kept_in_memory = [n for n in order if n < 10_000]
    went_to_disk = [n for n in order if n >= 10_000]
    assert kept_in_memory == sorted(kept_in_memory) and went_to_disk == sorted(went_to_disk)
