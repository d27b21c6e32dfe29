"""Publish-to-delivery latency of a lone message, ours next to NSQ's Go nsqd.

    python bench/latency.py [--rates 50,1000,20000] [--seconds 5] [--size 200] [--reference DIR]

For each rate, one connection PUBlishes at that steady rate (paced by the
clock, each body starting with the time it was sent) and one subscriber
takes the messages, FINs them and records, for each, the time from its
PUB to its arrival. Both are plain sockets on one event loop in this
process, speaking the V2 protocol through ``nsqpy.protocol`` and nothing
else, identically to both daemons. The subscriber keeps NSQ's default
client settings (it sends no IDENTIFY, so the daemon's default output
buffering applies) with RDY 2500, so the rate and not the window decides.
The first half second of each rate warms up and is not counted. Ours and
Go's run one after the other at each rate; Go's comes from ``--reference``
and shows "absent" when it is not there.
"""

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import urllib.request

from nsqpy.eventloop import new_event_loop
from nsqpy.localcluster import nsqd_process
from nsqpy.protocol import commands
from nsqpy.protocol.frames import FRAME_TYPE_ERROR, FRAME_TYPE_MESSAGE, HEARTBEAT, MAGIC_V2, FrameReader
from nsqpy.protocol.message import message_fields

REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "reference",
                         "nsq-v1.3.0", "bin")
WARM_UP = 0.5  # seconds at the start of each rate that are not counted
RDY = 2500
NOP = commands.encode_command(b"NOP")


class Subscriber(asyncio.Protocol):
    """SUB, RDY, FIN every message; a sample per message (nanoseconds since its PUB)."""

    def __init__(self, topic: str):
        self.topic = topic
        self.reader = FrameReader()
        self.samples: list[int] = []
        self.counting_from = sys.maxsize  # perf_counter_ns: messages sent earlier are not counted
        self.received = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(MAGIC_V2 + commands.sub(self.topic, "latency") + commands.rdy(RDY))

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter_ns()
        finished = []
        for frame_type, payload in self.reader.feed(data):
            if frame_type == FRAME_TYPE_MESSAGE:
                _, _, message_id, body = message_fields(payload)
                sent = int.from_bytes(body[:8], "big")
                if sent >= self.counting_from:
                    self.samples.append(now - sent)
                self.received += 1
                finished.append(message_id)
            elif frame_type == FRAME_TYPE_ERROR:
                raise SystemExit(f"subscriber: {payload.decode(errors='replace')}")
            elif payload == HEARTBEAT:
                self.transport.write(NOP)
        if finished:
            self.transport.write(commands.fin_many(finished))


class Publisher(asyncio.Protocol):
    """PUBs without waiting for each OK (the subscriber measures, not this side)."""

    def __init__(self, topic: str, size: int):
        self.topic = topic
        self.padding = b"x" * max(size - 8, 0)
        self.reader = FrameReader()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(MAGIC_V2)

    def data_received(self, data: bytes) -> None:
        for frame_type, payload in self.reader.feed(data):
            if frame_type == FRAME_TYPE_ERROR:
                raise SystemExit(f"publisher: {payload.decode(errors='replace')}")

    def publish(self) -> None:
        body = time.perf_counter_ns().to_bytes(8, "big") + self.padding
        self.transport.write(commands.pub(self.topic, body))


async def measure(tcp_address: str, topic: str, rate: int, seconds: float, size: int) -> list[int]:
    """Latency samples (ns) of ``rate`` msgs/s for ``seconds`` after the warm-up."""
    loop = asyncio.get_running_loop()
    host, port = tcp_address.rsplit(":", 1)
    publisher_transport, publisher = await loop.create_connection(lambda: Publisher(topic, size), host, int(port))
    publisher.publish()  # creates the topic, so the subscriber's channel sees every counted message
    await asyncio.sleep(0.2)
    subscriber_transport, subscriber = await loop.create_connection(lambda: Subscriber(topic), host, int(port))
    try:
        await asyncio.sleep(0.2)
        started = time.perf_counter()
        subscriber.counting_from = time.perf_counter_ns() + int(WARM_UP * 1e9)
        total = int(rate * (WARM_UP + seconds))
        sent = 0
        while sent < total:
            due = min(total, int((time.perf_counter() - started) * rate) + 1)
            for _ in range(due - sent):
                publisher.publish()
            sent = due
            await asyncio.sleep(max(0.0, started + sent / rate - time.perf_counter()))
        deadline = time.perf_counter() + 10
        while subscriber.received < sent + 1 and time.perf_counter() < deadline:  # + the one that made the topic
            await asyncio.sleep(0.01)
        if subscriber.received < sent + 1:
            raise SystemExit(f"{tcp_address}: {subscriber.received} of {sent + 1} messages arrived in time")
        return subscriber.samples
    finally:
        publisher_transport.close()
        subscriber_transport.close()


def wait_until_serving(daemon, timeout: float = 30.0) -> None:
    """Until /ping answers: nsqd prints its listening lines before loading
    its HTTP API, and a measurement must not start while that loads."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{daemon.http_url}/ping", timeout=timeout) as response:
                response.read()
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def summary(samples: list[int]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (f"{statistics.median(ordered) / 1e6:8.3f} {p99 / 1e6:8.3f} {ordered[-1] / 1e6:8.3f} "
            f"{len(ordered):>8}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="50,1000,20000", help="msgs/s to measure at (default 50,1000,20000)")
    parser.add_argument("--seconds", type=float, default=5.0, help="counted seconds per rate (default 5)")
    parser.add_argument("--size", type=int, default=200, help="message size in bytes (default 200)")
    parser.add_argument("--reference", default=REFERENCE, help="folder of NSQ's Go binaries")
    args = parser.parse_args()
    rates = [int(rate) for rate in args.rates.split(",")]
    go_nsqd = os.path.join(args.reference, "nsqd")
    executables = {"ours": None}
    if os.access(go_nsqd, os.X_OK):
        executables["go"] = go_nsqd
    else:
        print(f"go: absent ({go_nsqd} not found); ours only")
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        daemons = {}
        try:
            for name, executable in executables.items():
                os.mkdir(os.path.join(workdir, name))
                daemons[name] = nsqd_process(os.path.join(workdir, name), executable=executable).start()
                wait_until_serving(daemons[name])
            loop = new_event_loop()
            try:
                for rate in rates:
                    for name, daemon in daemons.items():
                        samples = loop.run_until_complete(
                            measure(daemon.tcp_address, f"latency_{rate}", rate, args.seconds, args.size))
                        rows.append(f"{rate:>7} {name:<5} {summary(samples)}")
                        print(rows[-1], flush=True)
            finally:
                loop.close()
        finally:
            for daemon in daemons.values():
                daemon.stop()
                daemon.kill()
    print(f"\npublish-to-delivery latency, {args.size}-byte messages, {args.seconds:g} s per rate (ms)")
    print(f"{'msgs/s':>7} {'nsqd':<5} {'p50':>8} {'p99':>8} {'max':>8} {'messages':>8}")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
