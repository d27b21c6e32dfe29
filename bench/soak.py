"""A long soak of one nsqd: mixed PUB/MPUB/DPUB, consumers that FIN, REQ and
TOUCH, and clients that come and go, while nsqd's RSS and open descriptors
are sampled every second. At the end every acknowledged message must have
been finished on every channel: ``lost`` must be 0.

    python bench/soak.py [--duration 600] [--csv soak.csv]

Prints one summary (RSS and descriptors at start, peak and end, messages
published, finished, redelivered, lost) and exits 1 if anything was lost.
The clients are written on the protocol codecs, not on nsqpy's client, so
the soak measures the daemon alone.
"""

import argparse
import asyncio
import csv
import os
import random
import sys
import tempfile
import time
import urllib.request

from nsqpy.localcluster import nsqd_process
from nsqpy.protocol import commands
from nsqpy.protocol.frames import FRAME_TYPE_ERROR, FRAME_TYPE_MESSAGE, HEARTBEAT, MAGIC_V2, FrameReader
from nsqpy.protocol.message import decode_message

TOPICS = ["soak_a", "soak_b", "soak_c"]
CHANNELS = ["first", "second"]
CONSUMERS_PER_CHANNEL = 2
PRODUCERS = 4
CHURN_EVERY = 2.0  # seconds between two client restarts


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class Connection:
    """A minimal V2 connection: write commands, read frames, answer heartbeats."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.frames = FrameReader()
        self.pending: list[tuple[int, bytes]] = []

    @classmethod
    async def open(cls, address: tuple[str, int]) -> "Connection":
        reader, writer = await asyncio.open_connection(*address)
        writer.write(MAGIC_V2)
        return cls(reader, writer)

    async def frame(self) -> tuple[int, bytes]:
        while not self.pending:
            data = await self.reader.read(65536)
            if not data:
                raise ConnectionError("closed by nsqd")
            for frame in self.frames.feed(data):
                if frame == (0, HEARTBEAT):
                    self.writer.write(commands.NOP)
                else:
                    self.pending.append(frame)
        return self.pending.pop(0)

    async def expect_ok(self) -> None:
        frame_type, data = await self.frame()
        if frame_type == FRAME_TYPE_ERROR or data != b"OK":
            raise RuntimeError(f"nsqd answered {data!r}")

    def close(self) -> None:
        self.writer.close()


class Ledger:
    """Which message each producer had acknowledged on which topic, and which
    each channel finished: one byte per message (bodies are ``p<producer>-<n>``),
    so millions of messages cost megabytes, not a set of bodies."""

    def __init__(self):
        self.topic_of = {number: bytearray() for number in range(PRODUCERS)}  # topic index + 1, 0: not acked
        self.finished = {(topic, channel): {number: bytearray() for number in range(PRODUCERS)}
                         for topic in TOPICS for channel in CHANNELS}
        self.acknowledged = 0

    @staticmethod
    def _mark(marks: bytearray, sequence: int, value: int) -> None:
        if sequence >= len(marks):
            marks.extend(bytes(sequence + 4096 - len(marks)))
        marks[sequence] = value

    def acked(self, topic: str, number: int, first: int, count: int) -> None:
        for sequence in range(first, first + count):
            self._mark(self.topic_of[number], sequence, TOPICS.index(topic) + 1)
        self.acknowledged += count

    def finish(self, topic: str, channel: str, body: bytes) -> None:
        number, sequence = body[1:].split(b"-")
        self._mark(self.finished[(topic, channel)][int(number)], int(sequence), 1)

    def lost(self) -> int:
        missing = 0
        for number, topics in self.topic_of.items():
            for channel in CHANNELS:
                for index, topic in enumerate(TOPICS, 1):
                    done = self.finished[(topic, channel)][number]
                    missing += sum(1 for sequence, mark in enumerate(topics)
                                   if mark == index and (sequence >= len(done) or not done[sequence]))
        return missing


class Soak:
    def __init__(self, address: tuple[str, int], duration: float, seed: int):
        self.address = address
        self.duration = duration
        self.rng = random.Random(seed)
        self.ledger = Ledger()
        self.deliveries = 0
        self.requeued = 0
        self.touched = 0
        self.restarts = 0
        self.producing = True
        self.stopping = False
        self.workers: dict[str, asyncio.Task] = {}

    # --- producers ---------------------------------------------------------------

    async def produce(self, number: int, start_sequence: int) -> None:
        """PUB, MPUB and DPUB in turn; a message counts once nsqd said OK."""
        rng = random.Random(number)
        sequence = start_sequence
        connection = await Connection.open(self.address)
        try:
            while self.producing:
                topic = rng.choice(TOPICS)
                kind = rng.random()
                first = sequence
                if kind < 0.5:
                    bodies = [b"p%d-%d" % (number, sequence)]
                    connection.writer.write(commands.pub(topic, bodies[0]))
                elif kind < 0.8:
                    bodies = [b"p%d-%d" % (number, sequence + i) for i in range(rng.randint(2, 40))]
                    connection.writer.write(commands.mpub(topic, bodies))
                else:
                    bodies = [b"p%d-%d" % (number, sequence)]
                    connection.writer.write(commands.dpub(topic, rng.randint(1, 500), bodies[0]))
                sequence += len(bodies)
                await connection.expect_ok()
                self.ledger.acked(topic, number, first, len(bodies))
                await asyncio.sleep(0.002)
        finally:
            connection.close()
            self.next_sequence[number] = sequence

    # --- consumers ---------------------------------------------------------------

    async def consume(self, topic: str, channel: str) -> None:
        """FIN most messages; REQ some (they come back), TOUCH some first."""
        connection = await Connection.open(self.address)
        try:
            connection.writer.write(commands.identify({"heartbeat_interval": 2000, "msg_timeout": 10000}))
            await connection.expect_ok()
            connection.writer.write(commands.sub(topic, channel) + commands.rdy(50))
            await connection.expect_ok()
            while True:
                frame_type, data = await connection.frame()
                if frame_type != FRAME_TYPE_MESSAGE:
                    continue
                message = decode_message(data)
                self.deliveries += 1
                roll = self.rng.random()
                if roll < 0.08 and message.attempts < 5:
                    connection.writer.write(commands.req(message.id, self.rng.randint(0, 200)))
                    self.requeued += 1
                    continue
                if roll < 0.16:
                    connection.writer.write(commands.touch(message.id))
                    self.touched += 1
                connection.writer.write(commands.fin(message.id))
                self.ledger.finish(topic, channel, message.body)
        finally:
            connection.close()

    # --- the run -----------------------------------------------------------------

    def start(self, name: str, coroutine) -> None:
        self.workers[name] = asyncio.get_running_loop().create_task(coroutine)

    async def churn(self) -> None:
        """Every CHURN_EVERY seconds one client hangs up (mid-stream, as a crash
        would) and a new one takes its place."""
        while not self.stopping:
            await asyncio.sleep(CHURN_EVERY)
            name = self.rng.choice(sorted(self.workers))
            self.workers[name].cancel()
            await asyncio.gather(self.workers[name], return_exceptions=True)
            self.restarts += 1
            if name.startswith("producer"):
                if self.producing:
                    number = int(name.split("-")[1])
                    self.start(name, self.produce(number, self.next_sequence[number]))
            else:
                _, topic, channel, _ = name.split("/")
                self.start(name, self.consume(topic, channel))

    async def run(self) -> None:
        self.next_sequence = {number: 0 for number in range(PRODUCERS)}
        for number in range(PRODUCERS):
            self.start(f"producer-{number}", self.produce(number, 0))
        for topic in TOPICS:
            for channel in CHANNELS:
                for i in range(CONSUMERS_PER_CHANNEL):
                    self.start(f"consumer/{topic}/{channel}/{i}", self.consume(topic, channel))
        churn = asyncio.get_running_loop().create_task(self.churn())
        await asyncio.sleep(self.duration)
        self.producing = False
        await asyncio.sleep(1.0)
        deadline = time.monotonic() + 120
        while self.ledger.lost() and time.monotonic() < deadline:
            await asyncio.sleep(2.0)  # consumers (and churn) go on until every channel has everything
        self.stopping = True
        churn.cancel()
        for task in self.workers.values():
            task.cancel()
        await asyncio.gather(churn, *self.workers.values(), return_exceptions=True)
        for name, task in self.workers.items():
            if not task.cancelled() and task.exception() is not None:
                print(f"{name}: {task.exception()!r}", file=sys.stderr)


async def sample(pid: int, soak: Soak, rows: list, done: asyncio.Event) -> None:
    started = time.monotonic()
    while not done.is_set():
        rows.append((round(time.monotonic() - started, 1), rss_kb(pid), open_fds(pid),
                     soak.ledger.acknowledged, soak.deliveries))
        try:
            await asyncio.wait_for(done.wait(), 1.0)
        except TimeoutError:
            pass


def create_channels(http_url: str) -> None:
    """Topics and channels before the first PUB, so every channel gets every message."""
    def post(path: str) -> None:
        urllib.request.urlopen(urllib.request.Request(http_url + path, method="POST"), timeout=5).close()
    for topic in TOPICS:
        post(f"/topic/create?topic={topic}")
        for channel in CHANNELS:
            post(f"/channel/create?topic={topic}&channel={channel}")


async def main_async(args) -> int:
    with tempfile.TemporaryDirectory() as data_path, nsqd_process(data_path, "--msg-timeout=10s") as nsqd:
        create_channels(nsqd.http_url)
        soak = Soak(nsqd.tcp_hostport, args.duration, args.seed)
        rows: list = []
        done = asyncio.Event()
        sampler = asyncio.get_running_loop().create_task(sample(nsqd.process.pid, soak, rows, done))
        await soak.run()
        done.set()
        await sampler
        tracebacks = nsqd.output.count("Traceback")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["seconds", "rss_kb", "fds", "acknowledged", "deliveries"])
            writer.writerows(rows)
    rss = [row[1] for row in rows]
    fds = [row[2] for row in rows]
    published = soak.ledger.acknowledged
    lost = soak.ledger.lost()
    print(f"soak {args.duration:.0f}s: {published:,} messages acknowledged, {soak.deliveries:,} deliveries "
          f"({soak.requeued:,} REQ, {soak.touched:,} TOUCH), {soak.restarts} client restarts")
    print(f"RSS MB start/peak/end: {rss[0] / 1024:.1f} / {max(rss) / 1024:.1f} / {rss[-1] / 1024:.1f}; "
          f"open fds start/peak/end: {fds[0]} / {max(fds)} / {fds[-1]}; samples: {len(rows)}")
    print(f"messages lost: {lost}; tracebacks in nsqd's log: {tracebacks}")
    return 1 if lost or tracebacks else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load (default 600)")
    parser.add_argument("--csv", default="", help="write the per-second samples there")
    parser.add_argument("--seed", type=int, default=11)
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
