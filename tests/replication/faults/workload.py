"""Publishers and consumers running while the faults happen, on an event
loop of their own in a background thread (the gnsq publisher in a process
of its own), so that the schedule's sleeps and the daemons' restarts stall
neither. Consumers start first and publishers once every consumer reads
from every node: whatever is acknowledged has a reader waiting."""

import asyncio
import time

from tests.support.loopthread import LoopThread
from tests.support.wire import wait_until

from .checker import Deliveries, Row, tally
from .consumer import Consumer
from .directory import Directory
from .publishers import Ack, GnsqPublisher, HttpPublisher, RawPublisher


class Workload:
    def __init__(self, lookupd_http_address: str, channels: dict[str, dict[str, float]], *, interval: float = 0.1,
                 batch: int = 5):
        """``channels``: each topic's channels (made on every node beforehand),
        with the seconds their consumer holds a message before its FIN;
        each node gets a publish every ``interval`` seconds from each kind of
        publisher, one body and ``batch`` bodies in turn."""
        self.lookupd = lookupd_http_address
        self.topics = list(channels)
        self.interval = interval
        self.batch = batch
        self.acks: list[Ack] = []
        self.loop = LoopThread("workload")
        self.directory = Directory(lookupd_http_address)
        self.consumers = [Consumer(self.directory, topic, channel, hold)
                          for topic, holds in channels.items() for channel, hold in holds.items()]
        for consumer in self.consumers:
            self.loop.spawn(consumer.run())
        self.stopping = asyncio.Event()  # set from this thread through the loop
        self.publishing = []
        self.gnsq: GnsqPublisher | None = None

    def start(self, nodes: int) -> None:
        """Publishing begins once every consumer reads from ``nodes`` nodes."""
        wait_until(lambda: all(len(consumer.subscribed) >= nodes for consumer in self.consumers), timeout=30)
        self.publishing = [self.loop.spawn(kind(self.directory, self.topics, self.acks, self.interval, self.batch)
                                       .run(self.stopping)) for kind in (RawPublisher, HttpPublisher)]
        self.gnsq = GnsqPublisher(self.lookupd, self.topics, self.interval, self.batch)

    def stop_publishing(self) -> None:
        """Every publish answered or given up on; the acknowledgements are all in."""
        self.loop.call_soon(self.stopping.set)
        for publisher in self.publishing:
            publisher.result(60)
        self.acks.extend(self.gnsq.stop())

    def channels(self) -> dict[str, Deliveries]:
        return {f"{consumer.topic}/{consumer.channel}": (self.topics.index(consumer.topic), list(consumer.deliveries))
                for consumer in self.consumers}

    def tally(self, node_of=lambda name: name) -> list[Row]:
        return tally(self.acks, self.channels(), node_of)

    def wait_delivered(self, quiet: float, bound: float) -> float:
        """Until every acknowledged body is delivered on every channel, or
        ``quiet`` seconds pass with no more of them delivered, or ``bound``
        seconds in all. -> how long it took."""
        began = time.monotonic()
        delivered, progress = -1, began
        while time.monotonic() - began < bound:
            rows = self.tally()
            if not any(row.lost for row in rows):
                break
            now_delivered = sum(row.delivered for row in rows)
            if now_delivered > delivered:
                delivered, progress = now_delivered, time.monotonic()
            elif time.monotonic() - progress > quiet:
                break
            time.sleep(0.5)
        return time.monotonic() - began

    def close(self) -> None:
        if self.gnsq is not None:
            self.gnsq.kill()
        self.loop.close(closing=self.directory.close)

    def __enter__(self) -> "Workload":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
