"""The consumer behind the ``nsq`` source: receives, holds and answers messages.

It lives in Spark's long-lived driver-side reader process, with the client's
Consumer on a private event loop in a daemon thread, so ``read()`` (called
from Spark's thread) only takes what has arrived. Messages taken into a
batch stay in flight, TOUCHed well before nsqd's timeout, until the source
says their batch is committed. The process ending closes the connections,
and nsqd requeues whatever was still in flight: no cleanup call from Spark
is needed for that.
"""

import asyncio
import logging
import threading
import time
from collections import deque

from ..client.consumer import Consumer
from .options import SourceOptions

log = logging.getLogger("nsqpy.spark")

_POLL = 0.005  # seconds between looks at the arrivals while a batch fills
_CONNECT_TIMEOUT = 30.0
_ANSWER_TIMEOUT = 10.0


class Fetcher:
    def __init__(self, options: SourceOptions):
        self.options = options
        self.arrived: deque = deque()  # appended by the loop thread, taken by read()
        self._taken: dict[bytes, object] = {}  # handed to Spark, not yet answered; loop thread only
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="nsqpy-spark-source", daemon=True)
        self._thread.start()
        self._consumer: Consumer | None = None
        self._toucher: asyncio.Task | None = None
        try:
            self._call(self._start(), _CONNECT_TIMEOUT)
        except BaseException:
            self.close()
            raise

    def _call(self, coroutine, timeout: float):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    async def _start(self) -> None:
        options = self.options
        self._consumer = Consumer(options.topic, options.channel, self._arrive, config=options.config)
        await self._consumer.connect_to_nsqds(options.nsqd_tcp_addresses)
        await self._consumer.connect_to_nsqlookupds(options.lookupd_http_addresses)
        self._toucher = self._loop.create_task(self._touch_loop())

    async def _arrive(self, message) -> None:
        message.disable_auto_response()
        self.arrived.append(message)

    def take(self, limit: int, first_wait: float, batch_wait: float) -> list:
        """Up to ``limit`` messages: wait up to ``first_wait`` for the first,
        then up to ``batch_wait`` for the batch to fill (less when nsqd can
        send no more)."""
        arrived = self.arrived
        deadline = time.monotonic() + first_wait
        while not arrived and time.monotonic() < deadline:
            time.sleep(_POLL)
        if not arrived:
            return []
        deadline = time.monotonic() + batch_wait
        while len(arrived) < limit and time.monotonic() < deadline and not self._consumer.is_saturated():
            time.sleep(_POLL)
        popped = [arrived.popleft() for _ in range(min(limit, len(arrived)))]
        # what came on a connection that has closed since is redelivered: take the copy instead
        batch = [message for message in popped if message.can_respond]
        self._loop.call_soon_threadsafe(self._taken.update, ((m.id, m) for m in batch))
        return batch

    def finish(self, messages) -> list:
        """FIN, and wait until the FINs are written to the sockets. Returns the
        messages whose connection closed first: nsqd will deliver them again."""
        if not messages:
            return []
        return self._call(self._answer(messages, requeue=False), _ANSWER_TIMEOUT)

    def requeue(self, messages) -> None:
        """REQ without delay or backoff: back to nsqd for another consumer or a later batch."""
        if messages:
            self._call(self._answer(messages, requeue=True), _ANSWER_TIMEOUT)

    def release_arrived(self) -> int:
        """Give back everything received but not yet in a batch; stop receiving."""
        self._loop.call_soon_threadsafe(self._consumer.change_max_in_flight, 0)  # before the REQs below
        released = []
        while self.arrived:
            released.append(self.arrived.popleft())
        self.requeue(released)
        return len(released)

    async def _answer(self, messages, requeue: bool) -> list:
        taken = self._taken
        for message in messages:
            taken.pop(message.id, None)
        if requeue:
            orphans = [message for message in messages if not message.can_respond]
            for message in messages:
                message.requeue(0, backoff=False)
        else:
            orphans = self._consumer.finish_all(messages)
        await self._consumer.flushed()
        return orphans

    def _touch_interval(self) -> float:
        """A third of the shortest message timeout nsqd granted."""
        timeouts = [c.msg_timeout for c in self._consumer.connection_stats()]
        return max(0.2, min(timeouts, default=60.0) / 3)

    async def _touch_loop(self) -> None:
        while True:
            await asyncio.sleep(self._touch_interval())
            for message in list(self._taken.values()) + list(self.arrived):
                message.touch()

    def close(self) -> None:
        """Give back what is held (nsqd would requeue it anyway) and stop."""
        if self._consumer is not None and self._loop.is_running():
            if self._toucher is not None:
                self._loop.call_soon_threadsafe(self._toucher.cancel)
            try:
                self._call(self._consumer.stop(timeout=1.0), _ANSWER_TIMEOUT)
            except Exception as error:  # closing is best effort: nsqd requeues on disconnect
                log.warning("nsq source: closing the consumer failed: %s", error)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
