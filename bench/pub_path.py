"""The Python cost of one PUB in nsqd, with the sockets taken away.

    python bench/pub_path.py [--connections 200] [--rounds 3000]

A PUB over loopback costs nsqd a read, a write and the kernel's share of
both (about 5 µs here, whatever the language) plus the steps of our code.
This starts a real nsqd in this process (ephemeral ports, a temporary data
dir), gives it ``--connections`` V2 connections whose transports only
count what they are handed, and has each send one 200-byte PUB per turn of
the event loop, as a crowd of publishers with one PUB in flight each does.
The CPU time per PUB is then what nsqd's own steps cost: command parsing,
the topic's queue, the answer, the turn's writes. Profile it with
``perf record`` or py-spy to see where those microseconds go, without the
kernel's noise; ``bench/crowd.py producers`` measures the whole round trip.
"""

import argparse
import asyncio
import json
import shutil
import tempfile
import time

from nsqpy.eventloop import new_event_loop
from nsqpy.nsqd.options import NsqdOptions
from nsqpy.nsqd.server import NSQD
from nsqpy.nsqd.tcp import V2Protocol

BODY = b"x" * 200
PUB = b"PUB pub_path\n" + len(BODY).to_bytes(4, "big") + BODY
WARMUP_ROUNDS = 200


class CountingTransport:
    """What a V2Protocol writes to, counted and dropped."""

    def __init__(self):
        self.writes = 0

    def write(self, data):
        self.writes += 1

    def writelines(self, parts):
        self.writes += 1

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 4150) if name == "peername" else default

    def pause_reading(self):
        pass

    def resume_reading(self):
        pass

    def is_closing(self):
        return False

    def close(self):
        pass

    def abort(self):
        pass

    def get_write_buffer_size(self):
        return 0


async def measure(connections: int, rounds: int) -> dict:
    data_path = tempfile.mkdtemp(prefix="pub_path.")
    nsqd = NSQD(NsqdOptions(tcp_address="127.0.0.1:0", http_address="127.0.0.1:0", data_path=data_path,
                            mem_queue_size=10_000_000, busy_poll=0))
    await nsqd.start()
    try:
        nsqd.get_topic("pub_path")
        protocols, transports = [], []
        for _ in range(connections):
            protocol, transport = V2Protocol(nsqd), CountingTransport()
            protocol.connection_made(transport)
            protocol.data_received(b"  V2")
            protocols.append(protocol)
            transports.append(transport)
        for _ in range(WARMUP_ROUNDS):
            for protocol in protocols:
                protocol.data_received(PUB)
            await asyncio.sleep(0)
        for transport in transports:
            transport.writes = 0
        start = time.process_time()
        for _ in range(rounds):
            for protocol in protocols:
                protocol.data_received(PUB)
            await asyncio.sleep(0)  # the turn ends: its answers are written
        cpu = time.process_time() - start
        answered = sum(transport.writes for transport in transports)
        published = connections * rounds
        assert answered == published, f"{answered} answers to {published} PUBs"  # one OK per turn each
        return {"connections": connections, "pubs": published, "cpu_us_per_pub": round(1e6 * cpu / published, 3)}
    finally:
        if "pub_path" in nsqd.topics:
            nsqd.delete_topic("pub_path")  # not written to disk at the stop
        await nsqd.stop()
        shutil.rmtree(data_path, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=200, help="publishing connections (default 200)")
    parser.add_argument("--rounds", type=int, default=3000, help="PUBs per connection measured (default 3000)")
    args = parser.parse_args()
    loop = new_event_loop()
    try:
        print(json.dumps(loop.run_until_complete(measure(args.connections, args.rounds))))
    finally:
        loop.close()


if __name__ == "__main__":
    main()
