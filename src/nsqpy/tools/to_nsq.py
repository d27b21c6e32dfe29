"""to_nsq: publish stdin to a topic, one message per ``--delimiter``-separated
record (empty records skipped), on every ``--nsqd-tcp-address``.

Records are published in MPUB batches of what one read brought (NSQ's tool
publishes them one PUB at a time; the messages and their order are the
same), with a few batches in flight. ``--rate`` throttles to N a second.
EOF or SIGINT/SIGTERM: whatever was read is published, then exit.

With ``--key-prefix=RUN`` each record is published keyed ``RUN:<n>``, its
number among the input's records from 0 (protocol/keyed.py): a rerun with
the same prefix and input after a failure queues only the records the
failed run had not, within the destination's window.
"""

import asyncio
import dataclasses
import os
import threading
import time

from ..options import option
from ..protocol.keyed import key_problem
from .app import ToolError, user_agent
from .clientopts import client_config
from .options import check_topic
from .publishing import PUBLISH_ERRORS, Destinations

READ_SIZE = 1 << 20
BATCH_BYTES = 1 << 20  # well under nsqd's --max-body-size (5 MiB)
BATCHES_IN_FLIGHT = 8


@dataclasses.dataclass
class ToNsqOptions:
    topic: str = option("", "NSQ topic to publish to")
    nsqd_tcp_addresses: list[str] = option([], "destination nsqd TCP address (may be given multiple times)",
                                           flag="nsqd-tcp-address")
    delimiter: str = option("\n", "character to split input from stdin")
    rate: int = option(0, "Throttle messages to n/second. 0 to disable")
    producer_opts: list[str] = option([], "option to passthrough to nsq.Producer, name,value (may be given "
                                      "multiple times, go-nsq's Config names)", flag="producer-opt")
    key_prefix: str = option("", "beyond NSQ: publish each record keyed <prefix>:<its number in the input, from "
                             "0> (KPUB, KMPUB), so a rerun with the same prefix and input queues only what the "
                             "last run had not (an nsqpy nsqd, within its --publish-key-window)")


MAX_PREFIX = 100  # and a record's number after it: a key stays within 128 bytes


class Throttle:
    """At most ``rate`` records a second, saving up at most one second's worth."""

    def __init__(self, rate: int):
        self.rate = rate
        self._tokens = 1.0
        self._last = time.monotonic()

    async def take(self, wanted: int) -> int:
        """How many of ``wanted`` may go now (at least one; waits for it)."""
        while True:
            now = time.monotonic()
            self._tokens = min(float(self.rate), self._tokens + (now - self._last) * self.rate)
            self._last = now
            if self._tokens >= 1:
                granted = min(wanted, int(self._tokens))
                self._tokens -= granted
                return granted
            await asyncio.sleep((1 - self._tokens) / self.rate)


def read_chunks(fd: int, loop: asyncio.AbstractEventLoop) -> asyncio.Queue:
    """Chunks of ``fd`` (b"" at EOF), read by a daemon thread: a stdin that
    blocks (a terminal, a quiet pipe) never holds up the loop or the exit."""
    chunks: asyncio.Queue = asyncio.Queue(maxsize=4)

    def read() -> None:
        while True:
            try:
                chunk = os.read(fd, READ_SIZE)
            except OSError as error:
                chunk = error
            asyncio.run_coroutine_threadsafe(chunks.put(chunk), loop).result()
            if not isinstance(chunk, bytes) or not chunk:
                return

    threading.Thread(target=read, name="to_nsq-stdin", daemon=True).start()
    return chunks


def batches(records: list[bytes]):
    """``(start, end)`` of each batch of ``records``."""
    start, size = 0, 0
    for index, record in enumerate(records):
        size += len(record)
        if size > BATCH_BYTES and index > start:
            yield start, index
            start, size = index, len(record)
    if start < len(records):
        yield start, len(records)


class StdinPublisher:
    def __init__(self, destinations: Destinations, topic: str, delimiter: bytes, throttle: Throttle | None,
                 key_prefix: str = ""):
        self.destinations = destinations
        self.key_prefix = key_prefix
        self.numbered = 0  # records given a number (a key) so far
        self.topic = topic
        self.delimiter = delimiter
        self.throttle = throttle
        self.published = 0
        self.failure: str | None = None
        self._slots = asyncio.Semaphore(BATCHES_IN_FLIGHT)
        self._tasks: set[asyncio.Task] = set()

    async def pump(self, chunks: asyncio.Queue) -> None:
        rest = b""
        while self.failure is None:
            chunk = await chunks.get()
            if isinstance(chunk, OSError):
                raise ToolError(f"reading stdin: {chunk.strerror}")
            if not chunk:
                await self.publish([rest] if rest else [])
                return
            records = (rest + chunk).split(self.delimiter)
            rest = records.pop()
            await self.publish([record for record in records if record])

    async def publish(self, records: list[bytes]) -> None:
        while records and self.failure is None:
            count = await self.throttle.take(len(records)) if self.throttle else len(records)
            taken = records[:count]
            first = self.numbered
            self.numbered += count
            for start, end in batches(taken):
                keys = ([f"{self.key_prefix}:{first + n}" for n in range(start, end)] if self.key_prefix
                        else None)
                await self._slots.acquire()
                task = asyncio.get_running_loop().create_task(self._send(taken[start:end], keys))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            records = records[count:]

    async def _send(self, batch: list[bytes], keys: list[str] | None) -> None:
        try:
            await self.destinations.publish(self.topic, batch, keys)
            self.published += len(batch)
        except PUBLISH_ERRORS as error:
            self.failure = self.failure or str(error) or type(error).__name__
        finally:
            self._slots.release()

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*self._tasks)


async def run(options: ToNsqOptions, stop: asyncio.Event, log) -> int:
    if not options.topic:
        raise ToolError("--topic required")
    check_topic("--topic", options.topic)  # NSQ's to_nsq exits 0, publishing nothing
    delimiter = options.delimiter.encode()
    if len(delimiter) != 1:
        raise ToolError("--delimiter must be a single byte")
    if not options.nsqd_tcp_addresses:
        raise ToolError("--nsqd-tcp-address required")
    if options.rate < 0:
        raise ToolError(f"--rate must not be negative (got {options.rate})")
    problem = key_problem(f"{options.key_prefix}:0".encode("utf-8")) if options.key_prefix else None
    if problem is not None or len(options.key_prefix) > MAX_PREFIX:
        raise ToolError(f"--key-prefix must be at most {MAX_PREFIX} printable ASCII characters without spaces "
                        f"(got {options.key_prefix!r})")
    config = client_config(user_agent("to_nsq"), "producer-opt", options.producer_opts)
    destinations = Destinations(options.nsqd_tcp_addresses, config)
    try:
        await destinations.connect()
        if options.rate:
            log.info("Throttling messages rate to max:%d/second", options.rate)
        publisher = StdinPublisher(destinations, options.topic, delimiter,
                                   Throttle(options.rate) if options.rate else None, options.key_prefix)
        pumping = asyncio.ensure_future(publisher.pump(read_chunks(0, asyncio.get_running_loop())))
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait([pumping, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        pumping.cancel()
        await asyncio.gather(pumping, return_exceptions=True)
        if pumping.done() and not pumping.cancelled() and pumping.exception():
            raise pumping.exception()
        await publisher.drain()
        if publisher.failure:
            raise ToolError(f"publishing to {options.topic} failed after {publisher.published} "
                            f"messages: {publisher.failure}")
    finally:
        await destinations.close()
    return 0
