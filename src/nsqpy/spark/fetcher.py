"""The consumer behind the ``nsq`` source: receives, holds and answers messages.

Messages are held as ``chunks.Chunk`` (a read of one connection, in columns)
and answered by id: the consumer is a bulk one, with no object per message.

It lives in Spark's long-lived driver-side reader process, with the client's
consumers (as many connections per nsqd as a batch needs: ``widening.py``)
on a private event loop in a daemon thread, so ``read()`` (called
from Spark's thread) only takes what has arrived. Messages taken into a
batch stay in flight, TOUCHed well before nsqd's timeout, until the source
says their batch is committed. The process ending closes the connections,
and nsqd requeues whatever was still in flight: no cleanup call from Spark
is needed for that.

A stop that must not lose acknowledgements (a graceful drain) cannot just
close: closing a socket with unread messages in it resets the connection,
and nsqd then discards the FINs it had received but not yet processed. So
``stop()`` sends CLS and waits for nsqd's CLOSE_WAIT on every connection:
nsqd answers commands in order, so that answer proves every FIN before it
was applied. It reports how many acknowledgements nsqd never confirmed:
those sent on a connection that closed first, and those nsqd refused. A
FIN is refused (E_FIN_FAILED) when the message timed out at nsqd before it
came, a TOUCH having come late on a machine too busy: nsqd has put the
message back in the queue and will deliver it again, so for the holder it
is an archived message whose copy is coming, not a finished one.
"""

import asyncio
import logging
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass

from ..protocol import commands
from ..protocol.errors import E_FIN_FAILED, E_TOUCH_FAILED
from .chunks import Chunk, count, message_ids, without
from .options import SourceOptions
from .widening import WideConsumer

log = logging.getLogger("nsqpy.spark")

_POLL = 0.005  # seconds between looks at the arrivals while a batch fills
_CONNECT_TIMEOUT = 30.0
_ANSWER_TIMEOUT = 10.0
_CLOSE_WAIT_TIMEOUT = 5.0


@dataclass(frozen=True)
class Stopped:
    """How a stop ended at nsqd. ``unconfirmed``: FINs sent on a connection
    that closed before nsqd confirmed them, so up to that many archived
    messages may be delivered again. ``released``: received but never put in
    a batch; nsqd delivers them again, which is no copy."""
    released: int
    unconfirmed: int


class Fetcher:
    def __init__(self, options: SourceOptions):
        self.options = options
        self.arrived: deque[Chunk] = deque()  # appended by the loop thread, taken by read()
        self._arrived_count = 0  # messages ever appended; loop thread only
        self._taken_count = 0  # messages ever taken out of ``arrived``; read()'s thread only
        self._taken: set[Chunk] = set()  # handed to Spark, not yet answered; loop thread only
        self._fins: Counter = Counter()  # FINs sent per connection; loop thread only
        self._fins_refused: Counter = Counter()  # per connection; loop thread only
        self._refused_ids: set[str] = set()  # of refused FINs, not yet asked for by refused(); loop thread only
        self._touches_refused = 0  # since the last touch round; loop thread only
        self._stopped: Stopped | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="nsqpy-spark-source", daemon=True)
        self._thread.start()
        self._consumer: WideConsumer | None = None
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
        self._consumer = WideConsumer(options.topic, options.channel, self._arrive, options.config)
        await self._consumer.connect(options.nsqd_tcp_addresses, options.lookupd_http_addresses)
        self._toucher = self._loop.create_task(self._touch_loop())

    def _arrive(self, conn, arrivals: list) -> None:
        conn.on_refused = self._refuse
        self.arrived.append(Chunk.of(conn, arrivals))
        self._arrived_count += len(arrivals)

    def _refuse(self, conn, error) -> None:
        if error.code == E_FIN_FAILED:
            self._fins_refused[conn] += 1
            if error.refused_id is not None:
                self._refused_ids.add(error.refused_id)
        elif error.code == E_TOUCH_FAILED:
            self._touches_refused += 1

    def refused(self) -> set[str]:
        """The ids of the FINs nsqd refused since the last call: their
        messages come again."""
        return self._call(self._take_refused(), _ANSWER_TIMEOUT)

    async def _take_refused(self) -> set[str]:
        refused, self._refused_ids = self._refused_ids, set()
        return refused

    def waiting(self) -> int:
        """Messages received and not yet taken."""
        return self._arrived_count - self._taken_count

    def take(self, limit: int, first_wait: float, batch_wait: float) -> list[Chunk]:
        """Up to ``limit`` messages: wait up to ``first_wait`` for the first,
        then up to ``batch_wait`` for the batch to fill (less when nsqd can
        send no more)."""
        deadline = time.monotonic() + first_wait
        while not self.waiting() and time.monotonic() < deadline:
            time.sleep(_POLL)
        if not self.waiting():
            return []
        deadline = time.monotonic() + batch_wait
        while self.waiting() < limit and time.monotonic() < deadline and not self._consumer.is_saturated():
            time.sleep(_POLL)
        arrived, batch, wanted = self.arrived, [], limit
        while wanted and arrived:
            chunk = arrived.popleft()
            if len(chunk) > wanted:
                chunk, rest = chunk.split(wanted)
                arrived.appendleft(rest)
            self._taken_count += len(chunk)
            wanted -= len(chunk)
            # what came on a connection that has closed since is redelivered: take the copy instead
            if not chunk.conn.closed:
                batch.append(chunk)
        self._loop.call_soon_threadsafe(self._taken.update, batch)
        return batch

    def drop(self, chunks: list[Chunk], ids: set[str]) -> tuple[list[Chunk], list[str]]:
        """FIN, unhandled, the taken messages whose id is in ``ids`` (copies of
        what was archived already); returns the rest and the ids dropped."""
        kept, copies = without(chunks, ids)
        if copies:
            self._call(self._replace_taken(chunks, kept), _ANSWER_TIMEOUT)
            self.finish(copies)
        return kept, message_ids(copies)

    async def _replace_taken(self, old: list[Chunk], new: list[Chunk]) -> None:
        self._taken.difference_update(old)
        self._taken.update(new)

    def pause(self) -> None:
        """Ask nsqd for nothing more (RDY 0), before FINs free room for more:
        what a one-batch reader (a partition) calls once it has its batch."""
        self._call(self._pause(), _ANSWER_TIMEOUT)

    async def _pause(self) -> None:
        self._consumer.change_max_in_flight(0)
        await self._consumer.flushed()

    def finish(self, chunks: list[Chunk]) -> list[Chunk]:
        """FIN, and wait until the FINs are written to the sockets. Returns the
        chunks whose connection closed first: nsqd will deliver them again."""
        if not chunks:
            return []
        return self._call(self._answer(chunks, requeue=False), _ANSWER_TIMEOUT)

    def stop(self) -> Stopped:
        """Stop receiving, give back everything received but not in a batch,
        and close only once nsqd confirmed every answer sent (CLOSE_WAIT).
        Call it when no batch is waiting for its commit."""
        if self._stopped is None:
            self._stopped = self._call(self._stop(), _ANSWER_TIMEOUT + _CLOSE_WAIT_TIMEOUT)
        return self._stopped

    async def _stop(self) -> Stopped:
        consumer = self._consumer
        consumer.change_max_in_flight(0)
        released = list(self.arrived)
        self.arrived.clear()
        await self._answer(released, requeue=True)
        connections = consumer.connections()
        answers = [conn.request(commands.CLS) for conn in connections]
        done, _ = await asyncio.wait(answers, timeout=_CLOSE_WAIT_TIMEOUT) if answers else ((), ())
        unconfirmed = 0
        for conn, answer in zip(connections, answers):
            if answer not in done or answer.exception() is not None:
                unconfirmed += self._fins[conn]
            else:  # every FIN answered: only the refused ones come again
                unconfirmed += self._fins_refused[conn]
            # closed here, not by the consumer: it would send a second CLS, which nsqd refuses
            consumer.forget_connection(conn)
            conn.close()
        late = count(self.arrived) + count(self._taken)  # came after the CLS, or never committed
        await self._shut_down()
        if unconfirmed:
            log.warning("nsq source: nsqd did not confirm %d acknowledgements (the connection closed first, or "
                        "the messages had timed out); those messages may be delivered again", unconfirmed)
        return Stopped(released=count(released) + late, unconfirmed=unconfirmed)

    async def _shut_down(self) -> None:
        if self._toucher is not None:
            self._toucher.cancel()
        await self._consumer.stop(timeout=1.0)

    async def _answer(self, chunks: list[Chunk], requeue: bool) -> list[Chunk]:
        self._taken.difference_update(chunks)
        orphans = self._consumer.requeue(chunks) if requeue else self._consumer.finish(chunks)
        if not requeue:
            orphaned = set(map(id, orphans))
            for chunk in chunks:
                if id(chunk) not in orphaned:
                    self._fins[chunk.conn] += len(chunk)
        await self._consumer.flushed()
        return orphans

    def _touch_interval(self) -> float:
        """A third of the shortest message timeout nsqd granted."""
        timeouts = [c.msg_timeout for c in self._consumer.connection_stats()]
        return max(0.2, min(timeouts, default=60.0) / 3)

    async def _touch_loop(self) -> None:
        while True:
            await asyncio.sleep(self._touch_interval())
            if self._touches_refused:
                log.warning("nsq source: %d held messages timed out at nsqd before they were touched (a machine "
                            "too busy for --msg-timeout?); nsqd delivers them again", self._touches_refused)
                self._touches_refused = 0
            for chunk in list(self._taken) + list(self.arrived):
                if not chunk.conn.closed:
                    self._consumer.touch(chunk)

    def close(self) -> None:
        """Stop without waiting for confirmations (nsqd requeues what is held)."""
        if self._consumer is not None and self._loop.is_running() and self._stopped is None:
            try:
                self._call(self._shut_down(), _ANSWER_TIMEOUT)
            except Exception as error:  # closing is best effort: nsqd requeues on disconnect
                log.warning("nsq source: closing the consumer failed: %s", error)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
