"""Publishing to nsqd: one node, or many with load balancing, failover and replicas.

``Producer("host:4150")`` is NSQ's producer: one connection, made on first
use and remade after it drops; any number of concurrent callers, their
commands pipelined and the answers matched in order; an error raised as soon
as the node fails. Given several addresses (or nsqlookupd's), the Producer
spreads publishes over the healthy nodes (``nodes.NodePool``), sends a
publish that a node failed or left unanswered for ``node_timeout`` to
another node at once, probes failed nodes in the background, and raises only
when no node accepted the publish within ``timeout``. With ``replicas=N``
each message goes to N distinct nodes behind one dedup key
(``protocol.dedupkey``), so that a consumer with ``dedup`` drops the copies.

Every pending call fails with a clear error on close or disconnect: nothing
waits forever.
"""

import asyncio
import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import count
from typing import Any

from ..protocol import commands, keyed
from ..protocol.dedupkey import with_key
from .config import Config
from .conn import Connection, nsqd_host_port
from .discovery import failure_reason, list_nodes
from .errors import (ConnectionClosedError, InvalidArgumentError, NoNodeAvailableError, ProtocolError, StoppedError,
                     check_name)
from .nodes import Node, NodePool

log = logging.getLogger("nsqpy.client")

# nsqd's answers that say "this node cannot take it now", not "this publish is wrong"
NODE_FAILURES = frozenset({"E_PUB_FAILED", "E_MPUB_FAILED", "E_DPUB_FAILED"})
EMPTY_POOL_POLL = 1.0  # seconds between nsqlookupd queries while no node is known or up
REPEAT_PAUSE = 0.2  # seconds before a keyed publish whose answer was lost is sent again


@dataclass(frozen=True)
class NodeStats:
    """One nsqd as a Producer sees it (``Producer.stats()``)."""

    up: bool
    pending: int
    published: int
    failures: int  # in a row
    last_error: str


class Producer:
    """Publishes to nsqd, from asyncio: ``async with Producer("host:4150") as
    producer: await producer.publish(topic, body)``. Connects on first use;
    one node (NSQ's producer) or many, with failover and replicas."""

    def __init__(self, addresses: str | Iterable[str] = (), config: Config | None = None, *,
                 lookupd_http_addresses: Iterable[str] = (), strategy: str = "round-robin", sticky: bool = False,
                 replicas: int = 1, quorum: int | None = None, dedup_key: bool | None = None,
                 timeout: float = 10.0, node_timeout: float = 3.0):
        """``addresses``: one nsqd ``host:port`` (NSQ's producer) or a list;
        ``lookupd_http_addresses``: nsqlookupd HTTP addresses whose ``/nodes``
        give the nsqd list, kept current every ``lookupd_poll_interval``.
        ``strategy``: ``round-robin`` or ``least-pending``; ``sticky`` keeps a
        topic on one node while it is up. ``replicas``: distinct nodes each
        message is published to; the call succeeds once ``quorum`` (default:
        all) acknowledged. ``dedup_key`` (default: on with replicas) starts
        each body with the key line consumers use to drop copies.
        ``timeout``: the most a call waits for a node to accept it;
        ``node_timeout``: how long one node may leave a publish unanswered
        before it counts as down (with more than one node)."""
        self._addresses = [addresses] if isinstance(addresses, str) else list(addresses)
        self._lookupds = list(lookupd_http_addresses)
        if not self._addresses and not self._lookupds:
            raise InvalidArgumentError("Producer needs nsqd addresses or lookupd_http_addresses")
        for address in self._addresses:
            nsqd_host_port(address)  # a bad address is refused here, not at the first publish
        if replicas < 1:
            raise InvalidArgumentError(f"replicas must be >= 1 (got {replicas})")
        quorum = replicas if quorum is None else quorum
        if not 1 <= quorum <= replicas:
            raise InvalidArgumentError(f"quorum must be in [1, replicas={replicas}] (got {quorum})")
        if timeout <= 0 or node_timeout <= 0:
            raise InvalidArgumentError("timeout and node_timeout must be positive")
        single = isinstance(addresses, str)
        self.address = self._addresses[0] if single else ", ".join(self._addresses or self._lookupds)
        self.config = config or Config()
        self.replicas = replicas
        self.quorum = quorum
        self.dedup_key = replicas > 1 if dedup_key is None else dedup_key
        self.timeout = timeout
        self.node_timeout = node_timeout
        # one node and no lookupd: NSQ's producer, whose errors are the caller's at once
        self._failover = len(self._addresses) > 1 or bool(self._lookupds)
        self._pool = NodePool(self._addresses, strategy, sticky)
        self._conns: dict[str, Connection] = {}
        self._connecting: dict[str, asyncio.Lock] = {}
        self._queued: dict[str, int] = {}  # publishes waiting for an address's connection
        self._tasks: set[asyncio.Task[Any]] = set()  # probes, discovery, copies past the quorum
        self._probing: set[str] = set()
        self._node_up = asyncio.Event()  # set when nodes are found, or one is back up
        self._discovered = asyncio.Event()  # set once nsqlookupd has been asked
        self._started = False
        self._closed = False
        self._id = secrets.randbits(62)
        self._calls = count()

    async def __aenter__(self) -> "Producer":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- publishing ----------------------------------------------------------------------------

    async def ping(self) -> None:
        """Connect if needed and check that a node answers. NOP has no answer; an
        IDENTIFY without feature negotiation does (``OK``) and changes nothing."""
        await self._send("", commands.identify({**self.config.identify_body(), "feature_negotiation": False}))

    # Each publish returns the address of the nsqd that took it (with
    # replicas, those that acknowledged, comma-separated).

    # With a key (str or bytes, 1 to 128 printable ASCII characters without
    # spaces), a publish is keyed (KPUB, KMPUB, KDPUB: protocol/keyed.py):
    # nsqd queues the first message with that key and answers OK to every
    # repeat within the topic's window. A keyed publish whose answer was lost
    # (the connection dropped or timed out) is sent again with the same key
    # until ``timeout``, so it is queued once; a retry that fails over to
    # another nsqd is a new publish there.

    async def publish(self, topic: str, body: bytes, *, key: str | bytes | None = None) -> str:
        """PUB one message. A topic name that is not NSQ's raises ``InvalidArgumentError``."""
        check_name("topic", topic)
        if key is not None:
            return await self._send(topic, keyed.kpub(topic, _key(key), self._keyed([body])[0]), repeatable=True)
        return await self._send(topic, commands.pub(topic, self._keyed([body])[0]))

    async def multi_publish(self, topic: str, bodies: list[bytes], *, keys: list[str | bytes] | None = None) -> str:
        """All or nothing on each node: nsqd queues every message or none
        (keyed: every message whose key it does not hold)."""
        check_name("topic", topic)
        if keys is not None:
            if len(keys) != len(bodies):
                raise InvalidArgumentError(f"{len(keys)} keys for {len(bodies)} bodies")
            command = keyed.kmpub(topic, [_key(key) for key in keys], self._keyed(bodies))
            return await self._send(topic, command, repeatable=True)
        return await self._send(topic, commands.mpub(topic, self._keyed(bodies)))

    async def deferred_publish(self, topic: str, delay: float, body: bytes, *, key: str | bytes | None = None) -> str:
        """Deliver after ``delay`` seconds (whole milliseconds on the wire)."""
        check_name("topic", topic)
        if key is not None:
            command = keyed.kdpub(topic, int(delay * 1000), _key(key), self._keyed([body])[0])
            return await self._send(topic, command, repeatable=True)
        return await self._send(topic, commands.dpub(topic, int(delay * 1000), self._keyed([body])[0]))

    def stats(self) -> dict[str, NodeStats]:
        """Each node's state and counts, by address."""
        return {node.address: NodeStats(node.up, node.pending, node.published, node.failures, node.last_error)
                for node in self._pool.nodes.values()}

    async def close(self) -> None:
        """Close the connections; later calls raise ``StoppedError``."""
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def _keyed(self, bodies: list[bytes]) -> list[bytes]:
        if not self.dedup_key:
            return bodies
        call = next(self._calls)
        return [with_key(self._id, call, index, body) for index, body in enumerate(bodies)]

    async def _send(self, topic: str, command: bytes, repeatable: bool = False) -> str:
        """``repeatable``: a keyed publish, sent again when its answer is lost."""
        if self._closed:
            raise StoppedError("producer is closed")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        await self._start(deadline)
        if self.replicas == 1:
            return await self._one_copy(topic, command, deadline, set(), repeatable)
        taken: set[Node] = set()  # nodes holding or being sent a copy of this message
        copies = [asyncio.create_task(self._one_copy(topic, command, deadline, taken, repeatable))
                  for _ in range(self.replicas)]
        acknowledged: list[str] = []
        failures: list[ConnectionClosedError] = []
        try:
            for earliest in asyncio.as_completed(copies):
                try:
                    acknowledged.append(await earliest)
                except ConnectionClosedError as error:
                    failures.append(error)
                if len(acknowledged) >= self.quorum:
                    break
                if len(failures) > self.replicas - self.quorum:
                    raise failures[0]
        except BaseException:
            for copy in copies:
                copy.cancel()
            raise
        for copy in copies:
            if not copy.done():  # past the quorum: let it finish, within the deadline
                self._keep(copy)
        return ", ".join(acknowledged)

    async def _one_copy(self, topic: str, command: bytes, deadline: float, taken: set[Node],
                        repeatable: bool = False) -> str:
        """Send ``command`` to one node not in ``taken``: on a node failure, to
        the next; when none is up, wait for one until ``deadline``. Without
        failover, a ``repeatable`` command whose answer was lost goes to the
        same node again."""
        loop = asyncio.get_running_loop()
        while True:
            node = self._pool.choose(topic, exclude=taken)
            if node is None:
                await self._wait_for_node(deadline)
                continue
            taken.add(node)
            try:
                await self._attempt(node, command, deadline)
                return node.address
            except (ConnectionClosedError, ProtocolError, OSError) as error:
                if isinstance(error, ProtocolError) and error.code == "E_INVALID" and repeatable:
                    raise _no_keys(node.address, error) from None
                if repeatable and not self._failover and not isinstance(error, ProtocolError):
                    if loop.time() + REPEAT_PAUSE >= deadline:
                        raise
                    log.warning("producer: no answer to a keyed publish from nsqd at %s (%s); sending it again",
                                node.address, error)
                    taken.discard(node)
                    await asyncio.sleep(REPEAT_PAUSE)
                    continue
                if not self._failover or (isinstance(error, ProtocolError) and error.code not in NODE_FAILURES):
                    raise
                taken.discard(node)
                self._node_failed(node, str(error))
                if loop.time() >= deadline:
                    raise self._unavailable() from None

    async def _attempt(self, node: Node, command: bytes, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        limit = deadline - loop.time()
        if self._failover:
            limit = min(limit, self.node_timeout)
        limit = max(limit, 0.001)
        expiry = loop.time() + limit
        node.pending += 1
        try:
            conn = self._conns.get(node.address)
            if conn is None or conn.closed or self._queued.get(node.address):
                # in line behind the publishes that came while the connection was made: one
                # that finds it made must not go out before those still waking up
                self._queued[node.address] = self._queued.get(node.address, 0) + 1
                try:
                    async with asyncio.timeout_at(expiry):
                        conn = await self._connection(node.address)
                finally:
                    self._queued[node.address] -= 1
            # one timer on the answer, the cheapest deadline asyncio has (a publish's common path)
            answer = conn.request(command)
            timer = loop.call_at(expiry, _expire, answer)
            try:
                await answer
            finally:
                timer.cancel()
        except TimeoutError:
            conn = self._conns.pop(node.address, None)
            if conn is not None:
                conn.close()  # frozen or overloaded: its other callers move on too
            raise ConnectionClosedError(f"nsqd at {node.address} did not answer in {limit:.3g}s") from None
        finally:
            node.pending -= 1
        node.published += 1

    async def _connection(self, address: str) -> Connection:
        """The address's connection, made if need be; callers get it in the
        order they asked (the lock's line), even once it is made."""
        lock = self._connecting.setdefault(address, asyncio.Lock())
        async with lock:
            conn = self._conns.get(address)
            if conn is None or conn.closed:
                conn = Connection(address, self.config)
                await conn.connect()
                if self._closed or address not in self._pool.nodes:
                    conn.close()
                    raise StoppedError("producer is closed") if self._closed else \
                        ConnectionClosedError(f"nsqd at {address} is no longer listed by nsqlookupd")
                self._conns[address] = conn
            return conn

    # --- node health ---------------------------------------------------------------------------

    def _node_failed(self, node: Node, reason: str) -> None:
        delay = self._pool.failed(node, reason)
        conn = self._conns.pop(node.address, None)
        if conn is not None:
            conn.close()
        if node.failures == 1:
            log.warning("producer: nsqd at %s is down (%s); publishing to the other nodes", node.address, reason)
        if node.address not in self._probing and not self._closed:
            self._probing.add(node.address)
            self._keep(asyncio.ensure_future(self._probe(node, delay)))

    async def _probe(self, node: Node, delay: float) -> None:
        """Until ``node`` answers an IDENTIFY again, or leaves the pool."""
        try:
            while not self._closed and self._pool.nodes.get(node.address) is node:
                await asyncio.sleep(delay)
                try:
                    async with asyncio.timeout(self.node_timeout):
                        conn = await self._connection(node.address)
                        await conn.request(commands.identify({**self.config.identify_body(),
                                                              "feature_negotiation": False}))
                except (ConnectionClosedError, ProtocolError, OSError, TimeoutError) as error:
                    stale = self._conns.pop(node.address, None)
                    if stale is not None:
                        stale.close()
                    delay = self._pool.failed(node, str(error) or f"no answer in {self.node_timeout}s")
                    continue
                self._pool.succeeded(node)
                log.warning("producer: nsqd at %s is back", node.address)
                self._node_up.set()
                return
        finally:
            self._probing.discard(node.address)

    async def _wait_for_node(self, deadline: float) -> None:
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            raise self._unavailable()
        self._node_up.clear()
        try:
            async with asyncio.timeout(remaining):
                await self._node_up.wait()
        except TimeoutError:
            raise self._unavailable() from None

    def _unavailable(self) -> NoNodeAvailableError:
        nodes = self._pool.nodes.values()
        detail = "; ".join(f"{n.address}: {n.last_error or 'busy'}" for n in nodes) or "nsqlookupd lists no nsqd"
        return NoNodeAvailableError(f"no nsqd accepted the publish within {self.timeout:g}s ({detail})")

    # --- discovery -----------------------------------------------------------------------------

    async def _start(self, deadline: float) -> None:
        if self._started:
            return
        self._started = True
        if self._lookupds:
            self._keep(asyncio.ensure_future(self._poll_lookupds()))
            try:
                async with asyncio.timeout(max(deadline - asyncio.get_running_loop().time(), 0.001)):
                    await self._discovered.wait()
            except TimeoutError:
                pass  # the publish then waits for a node, and says why none came

    async def _poll_lookupds(self) -> None:
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=self.config.lookupd_poll_timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while not self._closed:
                found: list[str] = []
                answered = False
                for address in self._lookupds:
                    try:
                        found += await list_nodes(session, address)
                        answered = True
                    except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as error:
                        log.warning("producer: nsqlookupd at %s: %s", address, failure_reason(error))
                if answered:
                    for node in self._pool.set_addresses(found):
                        conn = self._conns.pop(node.address, None)
                        if conn is not None:
                            conn.close()
                    self._node_up.set()
                self._discovered.set()
                idle = self.config.lookupd_poll_interval if self._pool.any_up() else EMPTY_POOL_POLL
                await asyncio.sleep(idle)

    def _keep(self, task: asyncio.Task[Any]) -> None:
        """Hold a background task until it ends, and read its outcome so none is left unretrieved."""
        self._tasks.add(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("producer: background publish ended: %s", task.exception())


def _key(key: str | bytes) -> bytes:
    raw = key.encode("utf-8") if isinstance(key, str) else key
    problem = keyed.key_problem(raw)
    if problem is not None:
        raise InvalidArgumentError(f"publish key {key!r} {problem}")
    return raw


def _no_keys(address: str, error: ProtocolError) -> ProtocolError:
    """NSQ's own nsqd refuses the keyed commands: say what that means."""
    return ProtocolError(error.code, f"{error.description}: nsqd at {address} does not take keyed publishes "
                                     "(NSQ's nsqd has no deduplication); publish without a key there")


def _expire(answer: asyncio.Future[bytes]) -> None:
    if not answer.done():
        answer.set_exception(TimeoutError())
