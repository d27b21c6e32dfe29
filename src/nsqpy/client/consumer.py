"""Consuming a topic's channel from many nsqd: go-nsq's behaviour, asyncio first.

The Consumer owns its connections (direct, or found through nsqlookupd,
each remade after it drops), the handler's workers (``workers.Workers``),
and the answers to messages. How much each nsqd may send, and when to back off, is decided by
its ``flow.FlowController`` from the events reported here: RDY is sent only
as it says.
"""

import asyncio
import logging
import random
import signal
from collections.abc import Callable, Collection, Coroutine, Iterable
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast, overload

from ..protocol import commands
from ..protocol.dedupkey import split_key
from .config import Config
from .conn import Connection
from .dedup import DELIVER, DROP, DedupWindow
from .discovery import failure_reason, lookup_producers
from .errors import InvalidArgumentError, NSQError, ProtocolError, StoppedError, check_name
from .flow import NOTHING, Decisions, FlowController
from .inbound import Arrival
from .message import Message
from .workers import Handler, Workers

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger("nsqpy.client")

_attempts = itemgetter(1)  # of an arrival (timestamp, attempts, id, body)
CLOSE_TIMEOUT = 1.0  # seconds a stopping consumer waits for nsqd to have read its last answers

#: A bulk consumer's handler: each read's arrivals, with the connection to answer them on.
BulkHandler: TypeAlias = Callable[[Connection, list[Arrival]], object]


@dataclass(frozen=True)
class ConsumerStats:
    """A Consumer's counts so far (``Consumer.stats()``)."""

    messages_received: int
    messages_finished: int
    messages_requeued: int
    connections: int
    ready_counts: dict[str, int]  # nsqd address -> the RDY last sent
    backoff_level: int
    copies_dropped: int = 0  # with dedup: copies FINished unhandled


@dataclass(frozen=True)
class ConnectionStats:
    """One of a Consumer's connections (``Consumer.connection_stats()``)."""

    address: str
    ready_count: int  # the RDY last sent
    in_flight: int  # received, not yet answered
    msg_timeout: float  # seconds nsqd waits for an answer before it redelivers


class Consumer:
    """Consumes a topic's channel from any number of nsqd, from asyncio
    (``connect_to_nsqd``, ``connect_to_nsqlookupd``, ``stop``) or blocking
    (``run``): each message goes to the handler, and its outcome to nsqd."""

    @overload
    def __init__(self, topic: str, channel: str, handler: Handler, *, config: Config | None = None,
                 concurrency: int = 1, on_give_up: Callable[[Message], object] | None = None,
                 dedup: bool | DedupWindow[Message] = False, bulk: Literal[False] = False): ...

    @overload
    def __init__(self, topic: str, channel: str, handler: BulkHandler, *, config: Config | None = None,
                 concurrency: int = 1, bulk: Literal[True]): ...

    def __init__(self, topic: str, channel: str, handler: Handler | BulkHandler, *, config: Config | None = None,
                 concurrency: int = 1, on_give_up: Callable[[Message], object] | None = None,
                 dedup: bool | DedupWindow[Message] = False, bulk: bool = False):
        """``handler(message)``: a coroutine function or a plain function (run
        in a thread pool of ``concurrency`` threads). Returning FINs the
        message, raising REQs it with backoff, unless the handler called
        ``message.disable_auto_response()``. ``on_give_up(message)`` sees
        messages past ``max_attempts`` before they are FINished unhandled.
        ``dedup``: strip the key line a Producer with replicas (or the Spark
        sink) puts before each body, and drop the copies of a message already
        handled; ``True`` for the default window, or a ``DedupWindow``.

        ``bulk``: for a holder of many messages at once (the Spark source),
        which answers them itself. ``handler(connection, arrivals)`` is
        called on the loop with each read's messages as they came,
        ``(timestamp, attempts, id, body)`` tuples, and answers them by id
        (``finish_ids``, ``requeue_ids``, ``touch_ids``), each exactly once:
        no ``Message`` per message, no workers, no max_attempts or dedup."""
        check_name("topic", topic)
        check_name("channel", channel)
        if concurrency < 1:
            raise InvalidArgumentError(f"concurrency must be >= 1 (got {concurrency})")
        # a window is tested for None, never for truth: an empty one has length 0
        window = DedupWindow() if dedup is True else (dedup if isinstance(dedup, DedupWindow) else None)
        if bulk and (window is not None or on_give_up is not None or (config and config.max_attempts)):
            raise InvalidArgumentError("a bulk consumer answers every message itself: "
                                       "no dedup, on_give_up or max_attempts")
        # bulk says which kind the handler is (a bulk consumer's workers stay idle)
        self._bulk_handler = cast(BulkHandler, handler) if bulk else None
        self.topic = topic
        self.channel = channel
        self.handler = handler
        self.config = config or Config()
        self.concurrency = concurrency
        self.on_give_up = on_give_up
        self.dedup: DedupWindow[Message] | None = window
        self.connections: dict[str, Connection] = {}
        self._flow: FlowController[Connection]  # made by _start, with the loop whose clock it reads
        self._max_in_flight = self.config.max_in_flight  # until there is a flow controller

        self._workers = Workers(cast(Handler, handler), concurrency, f"{topic}/{channel}")
        self._loop: asyncio.AbstractEventLoop | None = None  # the first connect's, where it runs
        self._tasks: set[asyncio.Task[None]] = set()
        self._connecting: set[str] = set()
        self._nsqd_addresses: list[str] = []
        self._lookupd_addresses: list[str] = []
        self._lookupd_index = 0
        self._http: "aiohttp.ClientSession | None" = None
        self._stopping = False
        self._backoff_timer: asyncio.TimerHandle | None = None
        self._received = 0
        self._finished = 0
        self._requeued = 0

    # --- public API ----------------------------------------------------------------------------

    async def connect_to_nsqd(self, address: str) -> None:
        """Subscribe through one nsqd (``host:port``); reconnect if it drops.
        An nsqd that cannot be reached raises; one that refuses the
        subscription (``E_SUB_FAILED``: the channel is full, ...) is tried
        again later, as go-nsq does."""
        self._start()
        if address not in self._nsqd_addresses:
            self._nsqd_addresses.append(address)
        try:
            await self._connect(address)
        except ProtocolError as error:
            log.warning("consumer %s/%s: %s refused: %s; re-connecting", self.topic, self.channel, address, error)
            self._spawn(self._reconnect(address))

    async def connect_to_nsqds(self, addresses: Iterable[str]) -> None:
        """``connect_to_nsqd`` for each, at once."""
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

    async def connect_to_nsqlookupds(self, addresses: Iterable[str]) -> None:
        """``connect_to_nsqlookupd`` for each: they are asked in turn."""
        for address in addresses:
            await self.connect_to_nsqlookupd(address)

    @property
    def flow(self) -> FlowController[Connection] | None:
        """How much each nsqd may send, and the backoff: made on the first
        connect, with the loop whose clock it reads (None before)."""
        return self._flow if self._loop is not None else None

    @property
    def max_in_flight(self) -> int:
        """The most messages in flight at once, over all connections."""
        return self.flow.max_in_flight if self.flow else self._max_in_flight

    def change_max_in_flight(self, count: int) -> None:
        """0 pauses the consumer."""
        if self.flow is None:
            self._max_in_flight = max(0, count)
        else:
            self._apply(self.flow.set_max_in_flight(count))

    def finish_all(self, messages: Collection[Message]) -> list[Message]:
        """FIN many messages with one write per connection (for batch
        processors holding thousands; call it on the consumer's loop). Returns
        the messages that could not be answered: already answered, or their
        connection closed (nsqd delivers those again)."""
        unanswerable: list[Message] = []
        by_connection: dict[Connection, list[bytes]] = {}
        for message in messages:
            if not message.claim_response():
                unanswerable.append(message)
                continue
            by_connection.setdefault(message.connection, []).append(message.id)
        for conn, ids in by_connection.items():
            conn.finish(ids)
            self._finished += len(ids)
            self._apply(self._flow.finished(conn, len(ids)))
        if self.dedup is not None:
            skipped = set(map(id, unanswerable))
            for message in messages:
                if id(message) not in skipped:
                    self._drop_held_copies(message)
        return unanswerable

    def finish_ids(self, conn: Connection, ids: list[bytes]) -> None:
        """A bulk consumer's FINs of messages that came on ``conn`` (one
        write); nothing is sent once ``conn`` has closed (nsqd redelivers)."""
        if conn.closed or self.connections.get(conn.address) is not conn:
            return
        conn.finish(ids)
        self._finished += len(ids)
        self._apply(self._flow.finished(conn, len(ids)))

    def requeue_ids(self, conn: Connection, ids: list[bytes]) -> None:
        """A bulk consumer's REQs, for redelivery at once and without backoff."""
        if conn.closed or self.connections.get(conn.address) is not conn:
            return
        for message_id in ids:
            conn.send(commands.req(message_id, 0))
            self._apply(self._flow.requeued(conn, False))
        self._requeued += len(ids)

    @staticmethod
    def touch_ids(conn: Connection, ids: list[bytes]) -> None:
        """A bulk consumer's TOUCHes: more time for messages still at work."""
        for message_id in ids:
            conn.send(commands.touch(message_id))

    def is_starved(self) -> bool:
        """True when some connection has nearly filled its RDY window: a batch
        processor should act on what it holds."""
        return self.flow is not None and self.flow.is_starved()

    def is_saturated(self) -> bool:
        """True when no nsqd will send more until something is answered."""
        return self.flow is not None and self.flow.is_saturated()

    def stats(self) -> ConsumerStats:
        """The counts so far, and each connection's RDY."""
        ready = self.flow.ready_counts() if self.flow else {}
        return ConsumerStats(self._received, self._finished, self._requeued, len(self.connections),
                             {conn.address: count for conn, count in ready.items()},
                             self.flow.backoff_level if self.flow else 0,
                             self.dedup.copies_dropped if self.dedup is not None else 0)

    def connection_stats(self) -> list[ConnectionStats]:
        """Each connection's RDY, messages in flight and nsqd's message timeout."""
        if self.flow is None:
            return []
        flows = self.flow.connections
        return [ConnectionStats(conn.address, flows[conn].ready, flows[conn].in_flight, conn.msg_timeout)
                for conn in self.connections.values() if conn in flows]

    async def flushed(self) -> None:
        """Until everything answered so far (FIN, REQ, TOUCH, RDY) has left for
        every nsqd: written to its socket, or its connection closed."""
        await asyncio.gather(*(conn.flushed() for conn in list(self.connections.values())),
                             return_exceptions=True)

    async def stop(self, timeout: float = 30.0) -> None:
        """Graceful: CLS to every nsqd (no new messages), let in-flight handlers
        finish and answer, then close. After ``timeout`` the connections are
        closed anyway (nsqd redelivers whatever was not answered)."""
        if self._stopping:
            return
        self._stopping = True
        flow = self.flow  # None until the first connection
        if flow is not None:
            flow.stop()
        if self._backoff_timer is not None:
            self._backoff_timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        for conn in list(self.connections.values()):
            self._flow.closing(conn)
            conn.request(commands.CLS)
        try:
            async with asyncio.timeout(timeout):
                while self._workers.busy or (flow is not None and flow.in_flight):
                    await asyncio.sleep(0.01)
        except TimeoutError:
            log.warning("consumer %s/%s: stop timed out with messages still in flight", self.topic,
                        self.channel)
        self._workers.stop()
        await asyncio.gather(*(conn.close_gracefully(CLOSE_TIMEOUT) for conn in list(self.connections.values())))
        if self._http is not None:
            await self._http.close()

    def run(self, *, nsqd_tcp_addresses: Iterable[str] = (), lookupd_http_addresses: Iterable[str] = ()) -> None:
        """Blocking facade: connect, consume until SIGINT/SIGTERM, stop gracefully."""
        async def main() -> None:
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
        self._flow = FlowController(self.config, self._loop.time)
        self._flow.set_max_in_flight(self._max_in_flight)
        self._workers.start(self._loop)
        self._spawn(self._redistribute_loop())

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None  # started: every caller comes after _start
        task = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._task_ended)

    def _task_ended(self, task: asyncio.Task[None]) -> None:
        """Every background task's failure is logged, in one line."""
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # the coroutine's name; a task that ran to its end eagerly (3.12) keeps no coroutine
            name = getattr(task.get_coro(), "__name__", task.get_name())
            log.error("consumer %s/%s: %s failed: %s", self.topic, self.channel, name, task.exception())

    async def _connect(self, address: str) -> None:
        if address in self.connections or address in self._connecting or self._stopping:
            return
        self._connecting.add(address)
        try:
            conn = Connection(address, self.config, on_messages=self._on_messages, on_close=self._on_close)
            await conn.connect()
            await conn.request(commands.sub(self.topic, self.channel))
            if self._stopping:
                conn.close()
                return
            self.connections[address] = conn
            log.info("consumer %s/%s: connected to %s", self.topic, self.channel, address)
            self._apply(self._flow.added(conn, conn.max_rdy_count))
        finally:
            self._connecting.discard(address)

    def _on_close(self, conn: Connection) -> None:
        if self.connections.get(conn.address) is not conn:
            return
        del self.connections[conn.address]
        decisions = self._flow.removed(conn)
        if self._stopping:
            return
        log.warning("consumer %s/%s: connection to %s closed", self.topic, self.channel, conn.address)
        self._apply(decisions)
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
        """Ask one lookupd (round robin, up to 3 tries) and connect to every nsqd
        it lists. aiohttp loads here, for a consumer that uses nsqlookupd: it
        is a sixth of a second of every process start otherwise (each of
        Spark's Python workers that reads nsqd, the tools given nsqd's address)."""
        import aiohttp

        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.config.lookupd_poll_timeout))
        for _ in range(min(3, len(self._lookupd_addresses))):
            address = self._lookupd_addresses[self._lookupd_index % len(self._lookupd_addresses)]
            self._lookupd_index += 1
            try:
                producers = await lookup_producers(self._http, address, self.topic)
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:
                log.warning("consumer: lookupd %s failed: %s", address, failure_reason(error))
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

    def _on_messages(self, conn: Connection, arrived: list[Arrival]) -> None:
        """What one read of ``conn`` brought: counted in flight at once, then
        each message given up (past max_attempts), dropped or held (a copy),
        or queued for the handler."""
        self._received += len(arrived)
        self._flow.received(conn, len(arrived))
        if self._bulk_handler is not None:
            self._bulk_handler(conn, arrived)
            return
        config, answered, dedup = self.config, self._answered, self.dedup
        max_attempts = config.max_attempts
        messages = [Message(message_id, body, timestamp, attempts, conn, config, answered)
                    for timestamp, attempts, message_id, body in arrived]
        if dedup is None and not (max_attempts and max(map(_attempts, arrived)) > max_attempts):
            self._workers.deliver(messages)  # the common case: nothing to decide per message
            return
        admitted = []
        for message in messages:
            if max_attempts and message.attempts > max_attempts:
                self._give_up(message)
            elif dedup is None or self._admit_copy(message, dedup):
                admitted.append(message)
        self._workers.deliver(admitted)

    def _give_up(self, message: Message) -> None:
        log.warning("consumer %s/%s: giving up on %s after %d attempts", self.topic, self.channel,
                    message.id.decode(), message.attempts - 1)
        if self.on_give_up is not None:
            try:
                self.on_give_up(message)
            except Exception:
                log.exception("consumer: on_give_up failed")
        message.finish()

    def _admit_copy(self, message: Message, dedup: DedupWindow[Message]) -> bool:
        """Strip the key line; False for a copy dropped or held."""
        message.dedup_key, message.body = split_key(message.body)
        if message.dedup_key is None:
            return True
        verdict = dedup.admit(message.dedup_key, message)
        if verdict == DROP:
            message.finish()
        return verdict == DELIVER

    def _answered(self, message: Message, requeued: bool, backoff: bool) -> None:
        """A message's first FIN or REQ (Message calls this)."""
        conn = message.connection
        if requeued:
            self._requeued += 1
            self._apply(self._flow.requeued(conn, backoff))
            if message.dedup_key is not None and self.dedup is not None:
                successor = self.dedup.requeued(message.dedup_key, message)
                if successor is not None:
                    self._workers.deliver([successor])
        else:
            self._finished += 1
            decisions = self._flow.finished(conn)
            if decisions is not NOTHING:
                self._apply(decisions)
            if message.dedup_key is not None:
                self._drop_held_copies(message)

    def _drop_held_copies(self, message: Message) -> None:
        if message.dedup_key is not None and self.dedup is not None:
            for copy in self.dedup.finished(message.dedup_key, message):
                copy.finish()

    # --- RDY and backoff, as the flow controller decides ----------------------------------------

    def _apply(self, decisions: Decisions[Connection]) -> None:
        for conn, count in decisions.rdy:
            conn.send(commands.rdy(count))
        if decisions.wake_in is not None:
            assert self._loop is not None  # started: only a connection's events back off
            log.warning("consumer %s/%s: backing off for %.3fs (level %d)", self.topic, self.channel,
                        decisions.wake_in, self._flow.backoff_level)
            self._backoff_timer = self._loop.call_later(decisions.wake_in, self._backoff_ended)

    def _backoff_ended(self) -> None:
        self._backoff_timer = None
        self._apply(self._flow.backoff_ended())

    async def _redistribute_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.rdy_redistribute_interval)
            self._apply(self._flow.tick())

