"""Many connections on one nsqd, driven the same way whichever nsqd it is.

    python bench/crowd.py consumers|producers --tcp-address HOST:PORT [--seconds 5]
                          [--consumers 2000] [--producers 100]

NSQ's Go bench tools open one connection per core; production has a worker
pool of thousands of consumers at RDY 1 and hundreds of publishers with
one PUB in flight each. This driver speaks NSQ's TCP protocol directly
(asyncio protocols on uvloop, no client library in the way), so what it
measures is nsqd:

- ``consumers``: ``--consumers`` connections SUBscribed to one channel at
  RDY 1, each FINishing a message as it arrives, while ``--producers``
  connections PUB 200-byte bodies (one in flight each) that carry the
  publish time. Deliveries/s and publish-to-delivery percentiles (PUBs/s
  beside them: publishers faster than the deliveries build a backlog,
  and its wait is in the percentiles, as it would be in production).
- ``producers``: ``--producers`` connections PUBbing, one in flight each,
  nobody reading. PUBs/s and PUB round-trip percentiles.

Everything is connected before the clock starts; one JSON line of results
goes to standard output (with nsqd's CPU time per message when
``--nsqd-pid`` names it). The driver runs in its own process: its CPU time
is in the result, so a saturated driver shows.
"""

import argparse
import asyncio
import json
import os
import resource
import struct
import sys
import time

from nsqpy.eventloop import new_event_loop
from cpu_meter import cpu_seconds  # bench/ is the script's folder, first on sys.path

FRAME = struct.Struct(">ii")
FRAME_RESPONSE, FRAME_ERROR, FRAME_MESSAGE = 0, 1, 2
MESSAGE_HEADER = 8 + 2 + 16  # timestamp, attempts, id
BODY = 200
STAMP = struct.Struct(">q")


class Connection(asyncio.Protocol):
    """A V2 connection that splits nsqd's frames and hands each to ``frame``."""

    def __init__(self):
        self.transport = None
        self.buffer = bytearray()
        self.ready = asyncio.get_running_loop().create_future()

    def connection_made(self, transport):
        self.transport = transport
        transport.write(b"  V2")
        self.started()

    def data_received(self, data):
        self.buffer += data
        start = 0
        while len(self.buffer) - start >= 8:
            size, kind = FRAME.unpack_from(self.buffer, start)
            if len(self.buffer) - start < 4 + size:
                break
            payload = bytes(self.buffer[start + 8:start + 4 + size])
            start += 4 + size
            if kind == FRAME_RESPONSE and payload == b"_heartbeat_":
                self.transport.write(b"NOP\n")
            elif kind == FRAME_ERROR:  # a measurement with errors in it measures nothing
                print(f"crowd: nsqd answered {payload.decode(errors='replace')}", file=sys.stderr, flush=True)
                os._exit(1)
            else:
                self.frame(kind, payload)
        del self.buffer[:start]

    def connection_lost(self, exc):
        if not self.ready.done():
            self.ready.set_exception(ConnectionError(f"nsqd closed the connection: {exc}"))

    def started(self):
        raise NotImplementedError

    def frame(self, kind: int, payload: bytes):
        raise NotImplementedError


class Publisher(Connection):
    """PUBs one message at a time, each sent when the last one's OK came."""

    def __init__(self, topic: bytes, run: "Run"):
        super().__init__()
        self.command = b"PUB " + topic + b"\n" + struct.pack(">i", BODY)
        self.run = run
        self.sent = 0

    def started(self):
        self.ready.set_result(None)

    def publish(self):
        self.sent = time.monotonic_ns()
        self.transport.write(self.command + STAMP.pack(self.sent) + bytes(BODY - STAMP.size))

    def frame(self, kind, payload):
        if self.run.measuring:
            self.run.published += 1
            if self.run.publishes_measured:
                self.run.count += 1
                self.run.latencies.append(time.monotonic_ns() - self.sent)
        if not self.run.stopped:
            self.publish()


class Subscriber(Connection):
    """SUB at RDY 1: FINishes each message as it arrives (the next comes then)."""

    def __init__(self, topic: bytes, channel: bytes, run: "Run"):
        super().__init__()
        self.topic, self.channel, self.run = topic, channel, run

    def started(self):
        self.transport.write(b"SUB " + self.topic + b" " + self.channel + b"\n")

    def frame(self, kind, payload):
        if kind == FRAME_RESPONSE:  # SUB's OK
            self.transport.write(b"RDY 1\n")
            self.ready.set_result(None)
            return
        self.transport.write(b"FIN " + payload[10:MESSAGE_HEADER] + b"\n")
        if self.run.measuring:
            self.run.count += 1
            self.run.latencies.append(time.monotonic_ns() - STAMP.unpack_from(payload, MESSAGE_HEADER)[0])


class Run:
    """What the connections count while the clock runs: PUB round trips
    (``publishes_measured``) or deliveries."""

    def __init__(self, publishes_measured: bool):
        self.publishes_measured = publishes_measured
        self.measuring = self.stopped = False
        self.count = self.published = 0
        self.latencies: list[int] = []


async def connect_all(factories, host: str, port: int) -> list:
    """Connected in waves, so the listen backlog is never what limits the crowd."""
    loop = asyncio.get_running_loop()
    connections = []
    for start in range(0, len(factories), 200):
        made = await asyncio.gather(*(loop.create_connection(factory, host, port)
                                      for factory in factories[start:start + 200]))
        connections += [protocol for _, protocol in made]
    await asyncio.wait_for(asyncio.gather(*(c.ready for c in connections)), 60)
    return connections


async def drive(args) -> dict:
    host, _, port = args.tcp_address.rpartition(":")
    topic, channel = b"crowd", b"workers"
    run = Run(publishes_measured=args.shape == "producers")
    subscribers = []
    if args.shape == "consumers":
        subscribers = await connect_all([lambda: Subscriber(topic, channel, run)] * args.consumers, host, int(port))
    publishers = await connect_all([lambda: Publisher(topic, run)] * args.producers, host, int(port))
    for publisher in publishers:
        publisher.publish()
    await asyncio.sleep(args.warmup)
    cpu, began = time.process_time(), time.monotonic()
    nsqd_cpu = cpu_seconds(args.nsqd_pid) if args.nsqd_pid else 0.0
    run.measuring = True
    await asyncio.sleep(args.seconds)
    run.measuring, run.stopped = False, True
    elapsed, cpu = time.monotonic() - began, time.process_time() - cpu
    for connection in publishers + subscribers:
        connection.transport.close()
    latencies = sorted(run.latencies)

    def percentile(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] / 1e6 if latencies else 0.0

    nsqd_cpu = cpu_seconds(args.nsqd_pid) - nsqd_cpu if args.nsqd_pid else 0.0
    return {"rate": run.count / elapsed, "published": run.published / elapsed, "p50_ms": percentile(0.50), "p99_ms": percentile(0.99),
            "nsqd_us": nsqd_cpu / run.count * 1e6 if run.count else 0.0, "driver_cpu": cpu / elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shape", choices=("consumers", "producers"))
    parser.add_argument("--tcp-address", required=True, help="<addr>:<port> of nsqd")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds (default 5)")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds before the clock starts (default 1)")
    parser.add_argument("--consumers", type=int, default=2000, help="subscribed connections (default 2000)")
    parser.add_argument("--producers", type=int, default=100, help="publishing connections (default 100)")
    parser.add_argument("--nsqd-pid", type=int, help="nsqd's process: its CPU time per message is reported")
    args = parser.parse_args()
    needed = args.consumers + args.producers + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, hard), hard))
    loop = new_event_loop()
    try:
        print(json.dumps(loop.run_until_complete(drive(args))), flush=True)
    finally:
        loop.close()


if __name__ == "__main__":
    main()
