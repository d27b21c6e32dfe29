"""Consuming a topic's channel from many nsqd: go-nsq's behaviour, asyncio first.

Flow control follows go-nsq: ``max_in_flight`` is shared out as RDY over the
connections (never more in total); when there are more connections than
``max_in_flight``, RDY 1 rotates among them so every nsqd is served. A
failed message (handler raised, or ``requeue(backoff=True)``) backs the
whole consumer off: RDY 0 everywhere for a growing period, then RDY 1 on one
connection to test; successes shorten the backoff until it ends.
"""

import asyncio
import concurrent.futures
import inspect
import logging
import random
import signal
from dataclasses import dataclass

import aiohttp

from ..protocol import commands
from ..protocol.dedupkey import split_key
from ..protocol.names import is_valid_channel_name, is_valid_topic_name
from .backoff import backoff_duration
from .config import Config
from .conn import Connection
from .dedup import DELIVER, DROP, DedupWindow
from .discovery import lookup_producers
from .errors import NSQError, StoppedError
from .message import Message

log = logging.getLogger("nsqpy.client")

STARVED_RATIO = 0.85
DEFAULT_MAX_RDY = 2500  # assumed when nsqd does not say


@dataclass(frozen=True)
class ConsumerStats:
    messages_received: int
    messages_finished: int
    messages_requeued: int
    connections: int
    ready_counts: dict  # nsqd address -> the RDY last sent
    backoff_level: int
    copies_dropped: int = 0  # with dedup: copies FINished unhandled


class Consumer:
    def __init__(self, topic: str, channel: str, handler, *, config: Config | None = None,
                 concurrency: int = 1, on_give_up=None, dedup: bool | DedupWindow = False):
        """``handler(message)``: a coroutine function or a plain function (run
        in a thread pool of ``concurrency`` threads). Returning FINs the
        message, raising REQs it with backoff, unless the handler called
        ``message.disable_auto_response()``. ``on_give_up(message)`` sees
        messages past ``max_attempts`` before they are FINished unhandled.
        ``dedup``: strip the key line a Producer with replicas (or the Spark
        sink) puts before each body, and drop the copies of a message already
        handled; ``True`` for the default window, or a ``DedupWindow``."""
        if not is_valid_topic_name(topic):
            raise ValueError(f"invalid topic name {topic!r}")
        if not is_valid_channel_name(channel):
            raise ValueError(f"invalid channel name {channel!r}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1 (got {concurrency})")
        self.topic = topic
        self.channel = channel
        self.handler = handler
        self.config = config or Config()
        self.concurrency = concurrency
        self.on_give_up = on_give_up
        self.dedup = DedupWindow() if dedup is True else (dedup or None)
        self.max_in_flight = self.config.max_in_flight
        self.connections: dict[str, Connection] = {}

        self._is_async = _is_coroutine_callable(handler)
        self._executor = None if self._is_async else concurrent.futures.ThreadPoolExecutor(concurrency)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue | None = None
        self._tasks: set[asyncio.Task] = set()
        self._workers: list[asyncio.Task] = []
        self._in_handler = 0  # messages inside the handler right now
        self._connecting: set[str] = set()
        self._nsqd_addresses: list[str] = []
        self._lookupd_addresses: list[str] = []
        self._lookupd_index = 0
        self._http: aiohttp.ClientSession | None = None
        self._stopping = False
        self._backoff_level = 0
        self._backoff_timer: asyncio.TimerHandle | None = None
        self._received = 0
        self._finished = 0
        self._requeued = 0

    # --- public API ----------------------------------------------------------------------------

    async def connect_to_nsqd(self, address: str) -> None:
        """Subscribe through one nsqd (``host:port``); reconnect if it drops."""
        self._start()
        if address not in self._nsqd_addresses:
            self._nsqd_addresses.append(address)
        await self._connect(address)

    async def connect_to_nsqds(self, addresses) -> None:
        await asyncio.gather(*(self.connect_to_nsqd(a) for a in addresses))

    async def connect_to_nsqlookupd(self, address: str) -> None:
        """Find nsqd nodes through nsqlookupd (``host:port`` or URL): once now,
        then every ``lookupd_poll_interval`` (with jitter), and at once when a
        connection closes."""
        self._start()
        if address in self._lookupd_addresses:
            return
        self._lookupd_addresses.append(address)
        if len(self._lookupd_addresses) == 1:
            await self._query_lookupd()
            self._spawn(self._poll_lookupd())

    async def connect_to_nsqlookupds(self, addresses) -> None:
        for address in addresses:
            await self.connect_to_nsqlookupd(address)

    def change_max_in_flight(self, count: int) -> None:
        """0 pauses the consumer."""
        self.max_in_flight = max(0, count)
        self._rebalance()

    def finish_all(self, messages) -> list:
        """FIN many messages with one write per connection (for batch
        processors holding thousands; call it on the consumer's loop). Returns
        the messages that could not be answered: already answered, or their
        connection closed (nsqd delivers those again)."""
        unanswerable = []
        by_connection: dict[Connection, list[bytes]] = {}
        for message in messages:
            if not message.can_respond:
                unanswerable.append(message)
                continue
            message._responded = True
            by_connection.setdefault(message._conn, []).append(message.id)
        for conn, ids in by_connection.items():
            conn.send(commands.fin_many(ids))
            conn.in_flight -= len(ids)
            self._finished += len(ids)
        if by_connection:
            self._backoff_result(success=True)
        if self.dedup is not None:
            skipped = set(map(id, unanswerable))
            for message in messages:
                if id(message) not in skipped:
                    self._drop_held_copies(message)
        return unanswerable

    def is_starved(self) -> bool:
        """True when some connection has nearly filled its RDY window: a batch
        processor should act on what it holds."""
        return any(c.in_flight > 0 and c.in_flight >= STARVED_RATIO * c.ready_count and not c.closing
                   for c in self.connections.values())

    def stats(self) -> ConsumerStats:
        return ConsumerStats(self._received, self._finished, self._requeued, len(self.connections),
                             {a: c.ready_count for a, c in self.connections.items()}, self._backoff_level,
                             self.dedup.copies_dropped if self.dedup else 0)

    async def stop(self, timeout: float = 30.0) -> None:
        """Graceful: CLS to every nsqd (no new messages), let in-flight handlers
        finish and answer, then close. After ``timeout`` the connections are
        closed anyway (nsqd redelivers whatever was not answered)."""
        if self._stopping:
            return
        self._stopping = True
        if self._backoff_timer is not None:
            self._backoff_timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        for conn in list(self.connections.values()):
            conn.closing = True
            conn.request(commands.CLS).add_done_callback(_ignore_result)
        try:
            async with asyncio.timeout(timeout):
                while self._queue is not None and (self._queue.qsize() or self._busy()):
                    await asyncio.sleep(0.01)
        except TimeoutError:
            log.warning("consumer %s/%s: stop timed out with messages still in flight", self.topic,
                        self.channel)
        for worker in self._workers:
            worker.cancel()
        for conn in list(self.connections.values()):
            conn.close()
        if self._http is not None:
            await self._http.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False)

    def run(self, *, nsqd_tcp_addresses=(), lookupd_http_addresses=()) -> None:
        """Blocking facade: connect, consume until SIGINT/SIGTERM, stop gracefully."""
        async def main():
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await self.connect_to_nsqds(nsqd_tcp_addresses)
            await self.connect_to_nsqlookupds(lookupd_http_addresses)
            await stop.wait()
            await self.stop()

        asyncio.run(main())

    # --- connections ------------------------------------------------------------------------

    def _start(self) -> None:
        if self._stopping:
            raise StoppedError("consumer is stopped")
        if self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        self._workers = [self._loop.create_task(self._work()) for _ in range(self.concurrency)]
        self._spawn(self._redistribute_loop())

    def _spawn(self, coroutine) -> None:
        task = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect(self, address: str) -> None:
        if address in self.connections or address in self._connecting or self._stopping:
            return
        self._connecting.add(address)
        try:
            conn = Connection(address, self.config, on_message=self._on_message, on_close=self._on_close)
            await conn.connect()
            await conn.request(commands.sub(self.topic, self.channel))
            if self._stopping:
                conn.close()
                return
            self.connections[address] = conn
            log.info("consumer %s/%s: connected to %s", self.topic, self.channel, address)
            self._rebalance()
        finally:
            self._connecting.discard(address)

    def _on_close(self, conn: Connection) -> None:
        if self.connections.get(conn.address) is not conn:
            return
        del self.connections[conn.address]
        if self._stopping:
            return
        log.warning("consumer %s/%s: connection to %s closed", self.topic, self.channel, conn.address)
        self._rebalance()
        if self._lookupd_addresses:
            self._spawn(self._query_lookupd())
        if conn.address in self._nsqd_addresses:
            self._spawn(self._reconnect(conn.address))

    async def _reconnect(self, address: str) -> None:
        delay = 0.5
        while not self._stopping and address not in self.connections:
            await asyncio.sleep(delay)
            try:
                await self._connect(address)
            except (NSQError, OSError) as error:
                log.warning("consumer: reconnect to %s failed: %s", address, error)
                delay = min(delay * 2, self.config.lookupd_poll_interval)

    async def _poll_lookupd(self) -> None:
        """Poll every lookupd_poll_interval (the first wait jittered). While no
        nsqd is connected yet, poll again soon instead (0.5 s, doubling up to
        the interval): a topic created a moment ago is found at once, not a
        whole interval later as in go-nsq."""
        config = self.config
        retry = 0.5
        first = True
        while True:
            if self.connections:
                jitter = random.random() * config.lookupd_poll_jitter if first else 1.0
                wait = config.lookupd_poll_interval * jitter
                first = False
                retry = 0.5
            else:
                wait = min(retry, config.lookupd_poll_interval)
                retry *= 2
            await asyncio.sleep(wait)
            await self._query_lookupd()

    async def _query_lookupd(self) -> None:
        """Ask one lookupd (round robin, up to 3 tries) and connect to every nsqd it lists."""
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.config.lookupd_poll_timeout))
        for _ in range(min(3, len(self._lookupd_addresses))):
            address = self._lookupd_addresses[self._lookupd_index % len(self._lookupd_addresses)]
            self._lookupd_index += 1
            try:
                producers = await lookup_producers(self._http, address, self.topic)
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:
                log.warning("consumer: lookupd %s failed: %s", address, error)
                continue
            for producer in producers:
                if producer not in self.connections:
                    self._spawn(self._connect_quietly(producer))
            return

    async def _connect_quietly(self, address: str) -> None:
        try:
            await self._connect(address)
        except (NSQError, OSError) as error:
            log.warning("consumer: cannot connect to %s: %s", address, error)

    # --- messages ------------------------------------------------------------------------------

    def _on_message(self, conn: Connection, timestamp: int, attempts: int, message_id: bytes, body: bytes) -> None:
        self._received += 1
        message = Message(message_id, body, timestamp, attempts, conn, self)
        max_attempts = self.config.max_attempts
        if max_attempts and attempts > max_attempts:
            log.warning("consumer %s/%s: giving up on %s after %d attempts", self.topic, self.channel,
                        message_id.decode(), attempts - 1)
            if self.on_give_up is not None:
                try:
                    self.on_give_up(message)
                except Exception:
                    log.exception("consumer: on_give_up failed")
            message.finish()
            return
        if self.dedup is not None:
            message.dedup_key, message.body = split_key(body)
            if message.dedup_key is not None:
                verdict = self.dedup.admit(message.dedup_key, message)
                if verdict == DROP:
                    message.finish()
                if verdict != DELIVER:
                    return
        self._queue.put_nowait(message)

    def _busy(self) -> bool:
        return self._in_handler > 0 or any(c.in_flight for c in self.connections.values())

    async def _work(self) -> None:
        queue = self._queue
        handler = self.handler
        loop = self._loop
        while True:
            message = await queue.get()
            self._in_handler += 1
            try:
                if self._is_async:
                    await handler(message)
                else:
                    await loop.run_in_executor(self._executor, handler, message)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("consumer %s/%s: handler failed on %s", self.topic, self.channel,
                              message.id.decode())
                if message.auto_response:
                    message.requeue()
            else:
                if message.auto_response:
                    message.finish()
            finally:
                self._in_handler -= 1

    def _on_finished(self, message: Message) -> None:
        self._finished += 1
        message._conn.in_flight -= 1
        self._backoff_result(success=True)
        self._drop_held_copies(message)

    def _on_requeued(self, message: Message, backoff: bool) -> None:
        self._requeued += 1
        message._conn.in_flight -= 1
        if backoff:
            self._backoff_result(success=False)
        if message.dedup_key is not None:
            successor = self.dedup.requeued(message.dedup_key, message)
            if successor is not None:
                self._queue.put_nowait(successor)

    def _drop_held_copies(self, message: Message) -> None:
        if message.dedup_key is not None:
            for copy in self.dedup.finished(message.dedup_key, message):
                copy.finish()

    # --- RDY and backoff ---------------------------------------------------------------------

    def _per_connection(self) -> int:
        count = len(self.connections) or 1
        return min(max(1, self.max_in_flight // count), self.max_in_flight)

    def _set_rdy(self, conn: Connection, count: int) -> None:
        count = min(count, conn.identity.get("max_rdy_count", DEFAULT_MAX_RDY))
        if count != conn.ready_count and not conn.closed and not conn.closing:
            conn.ready_count = count
            conn.last_rdy_at = self._loop.time()
            conn.send(commands.rdy(count))

    def _rebalance(self) -> None:
        """Give every connection its share, never more than max_in_flight in total."""
        if self._stopping or self._backoff_level or not self.connections:
            return
        target = self._per_connection()
        conns = sorted(self.connections.values(), key=lambda c: -c.ready_count)  # lower first
        for conn in conns:
            if conn.ready_count > target:
                self._set_rdy(conn, target)
        for conn in conns:
            total = sum(c.ready_count for c in self.connections.values())
            budget = self.max_in_flight - (total - conn.ready_count)
            self._set_rdy(conn, max(0, min(target, budget)))

    def _backoff_result(self, success: bool) -> None:
        """One result per backoff window: ignored while the backoff timer runs."""
        config = self.config
        if config.max_backoff_duration == 0 or self._backoff_timer is not None or self._stopping:
            return
        level = self._backoff_level
        if success:
            if level == 0:
                return
            level -= 1
        else:
            if backoff_duration("exponential", config.backoff_multiplier, level + 1) <= config.max_backoff_duration:
                level += 1
            elif level == 0:
                return
        self._backoff_level = level
        if level == 0:
            log.info("consumer %s/%s: backoff complete, resuming", self.topic, self.channel)
            self._rebalance()
            return
        duration = min(backoff_duration(config.backoff_strategy, config.backoff_multiplier, level),
                       config.max_backoff_duration)
        log.warning("consumer %s/%s: backing off for %.3fs (level %d)", self.topic, self.channel, duration, level)
        for conn in self.connections.values():
            self._set_rdy(conn, 0)
        self._backoff_timer = self._loop.call_later(duration, self._backoff_timeout)

    def _backoff_timeout(self) -> None:
        """Test the waters: RDY 1 on one connection; its result decides what next."""
        self._backoff_timer = None
        if self._stopping or not self.connections:
            return
        self._set_rdy(random.choice(list(self.connections.values())), 1)

    async def _redistribute_loop(self) -> None:
        """With more connections than max_in_flight (or backing off with several),
        move RDY 1 away from idle connections so every nsqd gets its turn."""
        config = self.config
        while True:
            await asyncio.sleep(config.rdy_redistribute_interval)
            conns = list(self.connections.values())
            if self._backoff_timer is not None or not conns:
                continue
            if not (len(conns) > self.max_in_flight or (self._backoff_level and len(conns) > 1)):
                continue
            now = self._loop.time()
            for conn in conns:
                if conn.ready_count > 0 and (now - conn.last_message_at > config.low_rdy_idle_timeout
                                             or now - conn.last_rdy_at > config.low_rdy_timeout):
                    self._set_rdy(conn, 0)
            budget = (1 if self._backoff_level else self.max_in_flight) - sum(c.ready_count for c in conns)
            idle = [c for c in conns if c.ready_count == 0]
            random.shuffle(idle)
            for conn in idle[:max(0, budget)]:
                self._set_rdy(conn, 1)


def _is_coroutine_callable(handler) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(getattr(handler, "__call__", None))


def _ignore_result(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()
