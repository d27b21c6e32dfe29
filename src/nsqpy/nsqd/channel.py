"""A channel: one copy of every topic message, shared out among its consumers.

Delivery is pushed, not pulled: a put or a consumer's opened window schedules
one ``_dispatch`` for the current loop iteration, which hands messages to
ready clients in bursts. So a burst of PUBs or FINs costs one dispatch, and
an idle consumer still gets its message in the same iteration.

In-flight messages live in their client's insertion-ordered dict, whose
order is also deadline order (one client, one msg_timeout), so timeouts are
found by reading from the front. Deferred messages wait in a heap; with
``--mem-queue-size=0`` a deferred publish is also written to the channel's
deferred disk queue (due time + message) and released once due and moved,
so deferral survives a restart or a crash.
"""

import heapq
import itertools
import struct
import time

from ..protocol.names import is_ephemeral
from .message import Message
from .queue import MessageQueue

_DUE = struct.Struct(">q")  # unix nanoseconds, before each deferred record


class Channel:
    def __init__(self, topic, name: str, queue: MessageQueue, loop, latency=None, deferred_disk=None):
        self.topic = topic
        self.name = name
        self.ephemeral = is_ephemeral(name)
        self.queue = queue
        self.loop = loop
        self.clients: list = []
        self.paused = False
        self.exiting = False

        self.deferred: list[tuple[float, int, Message]] = []
        self._deferred_seq = itertools.count()

        self.message_count = 0
        self.requeue_count = 0
        self.timeout_count = 0
        self.latency = latency  # a LatencyWindow when e2e percentiles are configured
        self.deferred_disk = deferred_disk
        if deferred_disk is not None:
            self._load_deferred()

        self._dispatch_scheduled = False
        self._rotation = 0

    # --- counts for stats ---------------------------------------------------

    @property
    def depth(self) -> int:
        return len(self.queue)

    @property
    def in_flight_count(self) -> int:
        return sum(len(client.in_flight) for client in self.clients)

    @property
    def deferred_count(self) -> int:
        return len(self.deferred)

    # --- putting messages in ---------------------------------------------------

    def put(self, message: Message) -> None:
        self.message_count += 1
        self.queue.put(message)
        self.schedule_dispatch()

    def put_many(self, messages: list[Message]) -> None:
        self.message_count += len(messages)
        self.queue.put_many(messages)
        self.schedule_dispatch()

    def put_deferred(self, message: Message, delay: float) -> None:
        self.message_count += 1
        disk = self.deferred_disk
        if disk is not None and message.disk_token is None:
            disk.put(_DUE.pack(time.time_ns() + int(delay * 1e9)) + message.encode())
            # every earlier record has been read, so the next one is this one
            message.disk_token = (disk, disk.get_with_token()[1])
        self._defer(message, delay)

    def _load_deferred(self) -> None:
        """Deferred publishes from before a restart, due when they were due."""
        disk = self.deferred_disk
        now, now_ns = time.monotonic(), time.time_ns()
        while (taken := disk.get_with_token()) is not None:
            record, token = taken
            message = Message.decode(record[_DUE.size:])
            message.disk_token = (disk, token)
            due = now + max(0, _DUE.unpack_from(record)[0] - now_ns) / 1e9
            heapq.heappush(self.deferred, (due, next(self._deferred_seq), message))

    def _defer(self, message: Message, delay: float) -> None:
        heapq.heappush(self.deferred, (time.monotonic() + delay, next(self._deferred_seq), message))

    def requeue(self, message: Message, delay: float) -> None:
        """A message back from a consumer (REQ) goes to the tail, or waits."""
        self.requeue_count += 1
        if delay > 0:
            self._defer(message, delay)
        else:
            self._requeue_now(message)

    def _requeue_now(self, message: Message) -> None:
        self.queue.put(message)
        self.schedule_dispatch()

    # --- handing messages out -------------------------------------------------

    def schedule_dispatch(self) -> None:
        if not self._dispatch_scheduled and self.clients:
            self._dispatch_scheduled = True
            self.loop.call_soon(self._dispatch)

    def _dispatch(self) -> None:
        self._dispatch_scheduled = False
        if self.paused or self.exiting:
            return
        queue = self.queue
        pending = len(queue)
        if not pending:
            return
        clients = self.clients
        count = len(clients)
        if count > 1:
            # start with a different client each time so none is always first
            self._rotation = (self._rotation + 1) % count
            clients = clients[self._rotation:] + clients[: self._rotation]
        ready = [c for c in clients if c.window() > 0]
        while ready and pending:
            share = max(1, pending // len(ready))
            still_ready = []
            for client in ready:
                sent = 0
                want = min(share, client.window(), pending)
                while sent < want:
                    message = queue.pop()
                    if message is None:
                        pending = 0
                        break
                    pending -= 1
                    if client.deliver(message):
                        sent += 1
                    else:  # sampled out, or a duplicate of one in flight: done with it
                        queue.ack(message)
                if client.window() > 0:
                    still_ready.append(client)
                if not pending:
                    break
            ready = still_ready

    def finish(self, message: Message) -> None:
        """A consumer FINished ``message``: record its latency, refill its window."""
        if self.latency is not None:
            self.latency.add(time.time_ns() - message.timestamp)
        self.queue.ack(message)
        self.schedule_dispatch()

    # --- consumers ------------------------------------------------------------

    def add_client(self, client) -> None:
        self.clients.append(client)

    def remove_client(self, client) -> None:
        """Drop a consumer. Its in-flight messages go back to the queue at once:
        nobody else can FIN them, and waiting for their timeouts only delays
        them (NSQ waits; nsqio/nsq#137). Their attempts still count."""
        try:
            self.clients.remove(client)
        except ValueError:
            return
        in_flight = client.in_flight
        if in_flight:
            for message in in_flight.values():
                message.client = None
                self.queue.put(message)
            in_flight.clear()
            self.schedule_dispatch()
        if self.ephemeral and not self.clients and not self.exiting:
            self.topic.delete_channel(self.name)

    # --- timeouts and deferred messages (called by the server's scan loop) ---

    def process_timeouts(self, now: float) -> bool:
        """Requeue expired in-flight messages and due deferred ones; True if any."""
        dirty = False
        for client in self.clients:
            in_flight = client.in_flight
            if not in_flight:
                continue
            expired = []
            for message in in_flight.values():
                if message.deadline > now:
                    break
                expired.append(message)
            if expired:
                for message in expired:
                    del in_flight[message.id]
                    message.client = None
                    self.timeout_count += 1
                    self.queue.put(message)
                client.on_window_opened()
                dirty = True
        deferred = self.deferred
        if deferred and deferred[0][0] <= now:
            while deferred and deferred[0][0] <= now:
                self.queue.put(heapq.heappop(deferred)[2])
            dirty = True
        if dirty:
            self.schedule_dispatch()
        return dirty

    # --- operator actions ---------------------------------------------------

    def pause(self) -> None:
        self.paused = True

    def unpause(self) -> None:
        self.paused = False
        self.schedule_dispatch()

    def empty(self) -> None:
        """Drop everything queued, deferred and in flight (NSQ's /channel/empty)."""
        for client in self.clients:
            client.in_flight.clear()
        self.deferred.clear()
        self.queue.clear()
        if self.deferred_disk is not None:
            self.deferred_disk.empty()

    def close(self) -> int:
        """Stop, and write queued, in-flight and deferred messages to disk.
        Returns how many messages were persisted."""
        self.exiting = True
        leftovers = [m for client in self.clients for m in client.in_flight.values()]
        disk = self.deferred_disk
        kept = 0
        for _, _, message in sorted(self.deferred):
            if disk is not None and message.disk_token is not None and message.disk_token[0] is disk:
                kept += 1  # stays on the deferred disk queue, due time and all
            else:
                leftovers.append(message)
        for client in list(self.clients):
            client.in_flight.clear()
            client.close()
        self.deferred.clear()
        try:
            return self.queue.persist(leftovers) + kept
        finally:
            self.queue.close()
            if disk is not None:
                disk.close()

    def delete(self) -> None:
        self.exiting = True
        for client in list(self.clients):
            client.in_flight.clear()
            client.close()
        self.deferred.clear()
        self.queue.delete()
        if self.deferred_disk is not None:
            self.deferred_disk.delete()
