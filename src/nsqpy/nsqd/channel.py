"""A channel: one copy of every topic message, shared out among its consumers.

Delivery is pushed, not pulled: a put or a consumer's opened window schedules
one ``_dispatch`` for the current loop iteration, which hands messages to
ready clients in bursts. So a burst of PUBs or FINs costs one dispatch, and
an idle consumer still gets its message in the same iteration.

The channel is the one owner of its in-flight and deferred messages, as in
NSQ: a consumer's FIN, REQ and TOUCH come here with the client and the id,
and are refused with NSQ's error when that client does not hold that message
(``inflight.InFlight`` keeps them by id and by deadline); clients only keep
counts. Deferred messages wait in a heap; with ``--mem-queue-size=0`` a
deferred publish is also written to the channel's deferred disk queue (due
time + message) and keeps that record until it is finished, come due or not,
so deferral survives a restart or a crash and no move between two disks
can leave two records of it. Every time comes from one clock, the loop's.
"""

import heapq
import itertools
import struct
import time
from typing import Any, Final

from ..protocol.errors import E_FIN_FAILED, E_REQ_FAILED, E_TOUCH_FAILED, ProtocolError
from ..protocol.names import is_ephemeral
from ..protocol.replication import EMPTIED, PAUSED, UNPAUSED
from .batch import Batch
from .bounds import DepthLimit
from .dead_letter import default_dead_letter_topic, is_valid_dead_letter_topic
from .inflight import InFlight
from .message import Message
from .queue import HandoffQueue, MessageQueue

_DUE: Final = struct.Struct(">q")  # unix nanoseconds, before each deferred record
DEAD_LETTERED_KEPT: Final = 10_000  # ids of recent dead letters a copy left by a crash is checked against
#: Messages one dispatch hands a client before the loop reads and writes
#: again: a consumer with a wide window gets its first burst while nsqd is
#: still taking its FINs, instead of the whole window after all of them.
MAX_BURST: Final = 256


class Channel:
    def __init__(self, topic, name: str, queue: MessageQueue, loop, latency=None, deferred_disk=None,
                 max_attempts: int = 0, message_ttl: float = 0.0, expire_action: str = "drop",
                 limit: DepthLimit | None = None, timed: set | None = None, replication=None):
        self.topic = topic
        self.replication = replication  # a replicated nsqd's Replicator (replication/), told what is done
        self.name = name
        self.ephemeral = is_ephemeral(name)
        self.loop = loop
        self.clock = loop.time
        self.clients: list = []
        # a queue that keeps nothing (an ephemeral channel in durable mode)
        # hands each message to a ready consumer or drops it, as NSQ does
        self.queue = HandoffQueue(self.clients) if queue.capacity == 0 and queue.disk is None else queue
        self.in_flight = InFlight()
        self.paused = False
        self.exiting = False
        # a Replay (replay.py) while the channel catches up with its topic's
        # log: live messages are not taken meanwhile, the log holds them
        self.replay: Any = None
        # while a replay reads or records it queued are unfinished, where a
        # restart resumes it (replay_position.py)
        self.replay_position: Any = None
        # in durable mode on a retained topic, the queue's disk is a cursor over
        # the topic's log (topiclog/cursor.py): the topic moves its end instead
        # of handing it copies
        self.cursor: Any = None

        self.deferred: list[tuple[float, int, Message]] = []
        self._deferred_seq = itertools.count()
        # nsqd's set of channels with messages in flight or deferred: the only
        # ones its scan loop visits (an idle channel costs the scan nothing)
        self._timed = timed
        self._in_timed = False

        self.message_count = 0
        self.requeue_count = 0
        self.timeout_count = 0
        self.dead_letter_count = 0
        # ids this channel dead-lettered lately: a crash while the topic hands
        # a disk record to its channels leaves two copies of one message
        # here, and both would reach max_attempts
        self._dead_lettered: dict[bytes, None] = {}
        self.expired_count = 0
        self.limit = limit or DepthLimit(f"channel {topic.name}/{name}")  # bounds.py; the topic checks publishes

        # dead-lettering (dead_letter.py): None settings follow the defaults
        self.default_max_attempts = max_attempts
        self.max_attempts_setting: int | None = None
        self.dead_letter_topic_setting: str | None = None
        self.max_attempts = 0
        self._apply_dead_letter_policy()
        self.latency = latency  # a LatencyWindow when e2e percentiles are configured
        self.deferred_disk = deferred_disk
        if deferred_disk is not None:
            self._load_deferred()

        self._dispatch_scheduled = False
        self._rotation = 0

        # expiry (expiry.py): the topic's TTL unless the channel sets its own
        self.topic_ttl = message_ttl
        self.expire_action = expire_action
        self.ttl_setting: float | None = None
        self.ttl_ns = 0
        self._apply_ttl()

    # --- counts for stats ---------------------------------------------------

    @property
    def depth(self) -> int:
        """Messages waiting: queued, and, while replaying, in the log beyond the cursor."""
        replay = self.replay
        return len(self.queue) if replay is None else len(self.queue) + replay.backlog()

    def spills(self, incoming: int) -> bool:
        """Whether ``incoming`` new messages would go to this channel's disk
        queue (its memory full): a retained topic's channel reads them from
        the log instead (replay.py), unless it drops the oldest at a limit."""
        queue = self.queue
        return (self.replay is None and queue.disk is not None and 0 < queue.capacity < queue.memory_depth + incoming
                and not self.limit.drops)

    @property
    def in_flight_count(self) -> int:
        return len(self.in_flight)

    @property
    def deferred_count(self) -> int:
        return len(self.deferred)

    def peek_deferred(self, limit: int) -> list[tuple[float, Message]]:
        """The ``limit`` deferred messages due soonest, with their due times
        in unix seconds, left exactly where they are."""
        to_wall_clock = time.time() - self.clock()
        return [(due + to_wall_clock, message) for due, _, message in heapq.nsmallest(limit, self.deferred)]

    # --- dead-letter policy ------------------------------------------------------

    @property
    def dead_letter_topic(self) -> str:
        return self.dead_letter_topic_setting or default_dead_letter_topic(self.topic.name)

    def configure_dead_letter(self, max_attempts: int | None, dead_letter_topic: str | None) -> None:
        """Set either or both (None keeps the current setting); names are
        checked by the caller (``dead_letter.is_valid_dead_letter_topic``)."""
        if max_attempts is not None:
            self.max_attempts_setting = max_attempts
        if dead_letter_topic is not None:
            self.dead_letter_topic_setting = dead_letter_topic
        self._apply_dead_letter_policy()
        self.schedule_dispatch()

    def _apply_dead_letter_policy(self) -> None:
        """The one number ``_dispatch`` checks. A default name NSQ cannot
        hold (a long or ephemeral topic's ``<topic>.dead``) turns it off."""
        wanted = self.default_max_attempts if self.max_attempts_setting is None else self.max_attempts_setting
        usable = is_valid_dead_letter_topic(self.dead_letter_topic, self.topic.name)
        self.max_attempts = wanted if usable else 0

    # --- expiry --------------------------------------------------------------------

    @property
    def message_ttl(self) -> float:
        return self.topic_ttl if self.ttl_setting is None else self.ttl_setting

    def configure_ttl(self, ttl: float | None) -> None:
        """The channel's own TTL in seconds (0: none), or None to follow the topic."""
        self.ttl_setting = ttl
        self._apply_ttl()

    def follow_topic_expiry(self, message_ttl: float, expire_action: str) -> None:
        self.topic_ttl, self.expire_action = message_ttl, expire_action
        self._apply_ttl()

    def _apply_ttl(self) -> None:
        self.ttl_ns = int(self.message_ttl * 1e9)
        self.schedule_dispatch()

    def _expire(self, message: Message) -> bool:
        """Dead-lettered if the topic says so and this channel has a usable
        dead-letter topic, dropped otherwise. False (delivered as usual) if
        the dead-letter topic refused it."""
        dead_letter = (self.expire_action == "dead-letter"
                       and is_valid_dead_letter_topic(self.dead_letter_topic, self.topic.name))
        if dead_letter and not self.topic.nsqd.publish_dead_letter(self, message):
            return False
        self.queue.ack(message)
        self._done(message)
        self.expired_count += 1
        return True

    # --- putting messages in ---------------------------------------------------

    def put(self, message: Message) -> None:
        if self.replay is not None:
            return
        self.message_count += 1
        self.queue.put(message)
        self._admitted()

    def put_many(self, messages: list[Message]) -> None:
        if self.replay is not None:
            return
        self.message_count += len(messages)
        self.queue.put_many(messages)
        self._admitted()

    def read_log(self, cursor) -> None:
        """From now on the queue's disk is ``cursor``."""
        self.cursor = cursor
        self.queue.disk = cursor
        cursor.defer = self._defer_record

    def leave_log(self) -> None:
        """Its topic is no longer retained (nothing owed): the queue's disk
        is the channel's own disk queue again, and no replay resumes."""
        if self.replay_position is not None:
            self.replay_position.remove()
        if self.cursor is not None:
            self.queue.disk = self.cursor.leave()
            self.cursor = None

    def logged(self, count: int) -> None:
        """``count`` more of the log are the cursor's to hand out."""
        self.message_count += count
        self._admitted()

    def _defer_record(self, record: bytes, delay: float) -> None:
        self.put_deferred(Message.decode(record), delay)

    def put_replayed(self, messages: list[Message]) -> None:
        """Records of the topic's log, moved in by the channel's replay."""
        self.message_count += len(messages)
        self.queue.put_many(messages)
        self._admitted()

    def put_batch(self, batch: Batch) -> None:
        if self.replay is not None:
            return
        self.message_count += batch.remaining
        self.queue.put_batch(batch)
        self._admitted()

    def _admitted(self) -> None:
        """Within a drop-oldest limit again, and handed out."""
        if self.limit.drops:
            self.limit.trim(self.queue, self._through)
        self.schedule_dispatch()

    def put_deferred(self, message: Message, delay: float) -> None:
        """Taken while replaying too: the log marks a deferred publish, and
        the replay skips what the channel received live."""
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
        now, now_ns = self.clock(), time.time_ns()
        while (taken := disk.get_with_token()) is not None:
            record, token = taken
            message = MessageQueue.held(Message.decode(record[_DUE.size:]), disk, token)  # attempts kept
            due = now + max(0, _DUE.unpack_from(record)[0] - now_ns) / 1e9
            heapq.heappush(self.deferred, (due, next(self._deferred_seq), message))
        if self.deferred:
            self._join_timed()

    def _defer(self, message: Message, delay: float) -> None:
        heapq.heappush(self.deferred, (self.clock() + delay, next(self._deferred_seq), message))
        self._join_timed()

    def _join_timed(self) -> None:
        if not self._in_timed and self._timed is not None:
            self._in_timed = True
            self._timed.add(self)

    def _leave_timed(self) -> None:
        if self._in_timed and self._timed is not None:
            self._in_timed = False
            self._timed.discard(self)

    # --- handing messages out -------------------------------------------------

    def schedule_dispatch(self) -> None:
        if not self._dispatch_scheduled and self.clients:
            self._dispatch_scheduled = True
            self.loop.call_soon(self._dispatch)

    def _dispatch(self) -> None:
        self._dispatch_scheduled = False
        if self.paused or self.exiting:
            return
        replication = self.replication
        if replication is not None and replication.fenced:
            replication.held_back()  # it may no longer own what it holds: replication/membership.py
            return
        queue = self.queue
        pending = len(queue)
        if not pending:
            return
        clients = self.clients
        count = len(clients)
        start = 0
        if count > 1:
            # start with a different client each time so none is always first
            start = self._rotation = (self._rotation + 1) % count
        # the ready clients in that order, no more of them than there are messages:
        # each takes one at least, so a worker pool of thousands at RDY 1 is not
        # scanned whole for every message
        ready: list = []
        for index in range(count):
            client = clients[(start + index) % count]
            if client.window() > 0:
                ready.append(client)
                if len(ready) >= pending:
                    break
        in_flight, now = self.in_flight, self.clock()
        max_attempts = self.max_attempts
        ttl_ns = self.ttl_ns
        published_before = time.time_ns() - ttl_ns if ttl_ns else 0  # older than this: expired
        while ready and pending:
            share = max(1, pending // len(ready))
            still_ready = []
            for client in ready:
                want = min(share, client.window(), pending, MAX_BURST)
                burst: list[Message] = []
                disk_ids: set[bytes] = set()
                from_disk: list[Message] = []
                while len(burst) < want:
                    message = queue.pop()
                    if message is None:
                        pending = 0
                        break
                    pending -= 1
                    # a second copy of one in flight or dead-lettered lately (a crash
                    # while the topic hands a disk record to its channels leaves two),
                    # or sampled out: done with it
                    if message.disk_token is not None:
                        if message.id in in_flight or message.id in disk_ids or message.id in self._dead_lettered:
                            queue.ack(message)
                            continue
                        disk_ids.add(message.id)
                    if client.sample_rate and not client.samples(message):
                        queue.ack(message)
                        self._done(message)
                        continue
                    if ttl_ns and message.timestamp < published_before and self._expire(message):
                        continue
                    if max_attempts and message.attempts >= max_attempts and self._dead_letter(message):
                        continue
                    burst.append(message)
                    if message.disk_token is not None:
                        from_disk.append(message)
                if burst:
                    if from_disk:
                        MessageQueue.note_deliveries(from_disk)
                    in_flight.start(burst, client, now, client.msg_timeout)
                    self._join_timed()
                    client.deliver(burst)
                if client.window() > 0:
                    still_ready.append(client)
                if not pending:
                    break
            if still_ready and pending:
                # the rest after the loop has read and written: what a client
                # finishes meanwhile comes back while the next burst goes out
                self.schedule_dispatch()
                return
            ready = still_ready

    def _dead_letter(self, message: Message) -> bool:
        """Published to the dead-letter topic (with its id), then released
        here. A message read from disk is first named there as moving, so a
        crash in between is settled at startup (dead_letter.settle_interrupted):
        never lost, never dead-lettered twice. False (the message is delivered
        as usual) if the disk or the dead-letter topic refused."""
        held = message.disk_token
        if held is not None:
            try:
                held[0].begin_move(held[1])
            except OSError as error:
                self.topic.nsqd.log.error("TOPIC(%s): CHANNEL(%s): cannot dead-letter: %s", self.topic.name,
                                          self.name, error)
                return False
        if not self.topic.nsqd.publish_dead_letter(self, message):
            return False
        self.queue.ack(message)
        self._done(message)
        self.dead_letter_count += 1
        if held is not None:
            dead_lettered = self._dead_lettered
            dead_lettered[message.id] = None
            if len(dead_lettered) > DEAD_LETTERED_KEPT:
                del dead_lettered[next(iter(dead_lettered))]
        return True

    def interrupted_moves(self) -> list[tuple[Any, bytes]]:
        """After a restart: (disk, message id) for each of this channel's
        disks where a crash cut dead-lettering short (dead_letter.settle_interrupted)."""
        moves = []
        for disk, skip in ((self.queue.disk, 0), (self.deferred_disk, _DUE.size)):
            if disk is not None and disk.moving is not None:
                moves.append((disk, Message.decode(disk.record_at(disk.moving)[skip:]).id))
        return moves

    def settle_move(self, disk: Any, copied: bool) -> None:
        """The interrupted dead-lettering on ``disk`` is complete (``copied``:
        the record goes) or is to be done again (it is read as usual). A
        deferred record was read into the heap when the channel was made,
        so a complete one is taken out of it and released."""
        if copied and disk is self.deferred_disk:
            for entry in self.deferred:
                held = entry[2].disk_token
                if held is not None and held[1][2:] == disk.moving:
                    self.deferred.remove(entry)
                    heapq.heapify(self.deferred)
                    MessageQueue.ack(entry[2])  # the acknowledgement ends the move
                    return
        disk.settle_move(copied)

    # --- a consumer's answers (FIN, REQ, TOUCH) --------------------------------

    def finish(self, client, message_id: bytes) -> None:
        """FIN: the message is done; record its latency, refill the window."""
        message = self._answered(client, message_id, E_FIN_FAILED, "FIN")
        client.finish_count += 1
        if self.latency is not None:
            self.latency.add(time.time_ns() - message.timestamp)
        self.queue.ack(message)
        self._done(message)
        self.schedule_dispatch()

    def _done(self, message: Message) -> None:
        """Through with ``message`` for good: a replicated nsqd's peers
        forget their copy for this channel (replication/)."""
        self._through(message)
        replication = self.replication
        if replication is not None:
            replication.done(self.topic.name, self.name, message.id)

    def _through(self, message: Message) -> None:
        """``message`` needs the log no more to come back after a crash
        (finished, dropped, or kept by the channel's disk queue): the
        replay's saved position may pass it."""
        position = self.replay_position
        if position is not None and message.offset >= 0:
            position.through(message.offset)

    def _requeue(self, message: Message) -> None:
        """Back in the queue: memory, or when it is full, the disk queue,
        which keeps a record a replay queued from then on."""
        if not self.queue.put(message):
            self._through(message)

    def requeue(self, client, message_id: bytes, delay: float) -> None:
        """REQ: back to the tail of the queue, or deferred for ``delay`` seconds."""
        message = self._answered(client, message_id, E_REQ_FAILED, "REQ")
        client.requeue_count += 1
        self.requeue_count += 1
        if delay > 0:
            self._defer(message, delay)
        else:
            self._requeue(message)
        self.schedule_dispatch()

    def touch(self, client, message_id: bytes, max_msg_timeout: float) -> None:
        """TOUCH: the message's timeout starts again (up to ``max_msg_timeout`` after delivery)."""
        message = self.in_flight.get(message_id)
        if message is None or message.client is not client:
            raise self._refusal(client, message_id, E_TOUCH_FAILED, "TOUCH")
        self.in_flight.touch(message, self.clock(), max_msg_timeout)

    def _answered(self, client, message_id: bytes, code: str, name: str) -> Message:
        """Out of flight, for the client that holds it; NSQ's error otherwise."""
        message = self.in_flight.take(message_id, client)
        if message is None:
            raise self._refusal(client, message_id, code, name)
        message.client = None
        client.in_flight_count -= 1
        return message

    def _refusal(self, client, message_id: bytes, code: str, name: str) -> ProtocolError:
        """NSQ's error for an answer to a message ``client`` does not hold."""
        message = self.in_flight.get(message_id)
        reason = "ID not in flight" if message is None else "client does not own message"
        return ProtocolError(code, f"{name} {message_id.decode('ascii', 'replace')} failed {reason}")

    @staticmethod
    def _released(message: Message) -> None:
        message.client.in_flight_count -= 1
        message.client = None

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
        held = self.in_flight.remove_client(client)
        for message in held:
            self._released(message)
            self._requeue(message)
        if held:
            self.schedule_dispatch()
        if self.ephemeral and not self.clients and not self.exiting:
            self.topic.delete_channel(self.name)

    # --- timeouts and deferred messages (called by the server's scan loop) ---

    def process_timeouts(self, now: float) -> bool:
        """Requeue expired in-flight messages and due deferred ones; True if any."""
        expired = self.in_flight.expired(now)
        for message in expired:
            self._released(message)
            self.timeout_count += 1
            self._requeue(message)
        dirty = bool(expired)
        deferred = self.deferred
        if deferred and deferred[0][0] <= now:
            while deferred and deferred[0][0] <= now:
                self._requeue(heapq.heappop(deferred)[2])
            dirty = True
        if dirty:
            self.schedule_dispatch()
        if not deferred and not self.in_flight_count:
            self._leave_timed()
        return dirty

    # --- operator actions ---------------------------------------------------

    def pause(self) -> None:
        self.paused = True
        self._tell_peers(PAUSED)

    def unpause(self) -> None:
        self.paused = False
        self.schedule_dispatch()
        self._tell_peers(UNPAUSED)

    def _tell_peers(self, kind: int) -> None:
        """A replicated nsqd's peers keep up with what operators do (replication/)."""
        replication = self.replication
        if replication is not None:
            replication.changed(self.topic.name, self.name, kind)

    def empty(self) -> None:
        """Drop everything queued, deferred and in flight (NSQ's /channel/empty)."""
        self._drop_in_flight()
        self.deferred.clear()
        self.queue.clear()
        if self.deferred_disk is not None:
            self.deferred_disk.empty()
        if self.replay_position is not None:
            self.replay_position.clear()
        self._tell_peers(EMPTIED)

    def close(self) -> int:
        """Stop, and write queued, in-flight and deferred messages to disk.
        Returns how many messages were persisted."""
        self.exiting = True
        self._leave_timed()
        leftovers = self._drop_in_flight()
        disk = self.deferred_disk
        kept = 0
        for _, _, message in sorted(self.deferred):
            if disk is not None and message.disk_token is not None and message.disk_token[0] is disk:
                kept += 1  # stays on the deferred disk queue, due time and all
            else:
                leftovers.append(message)
        for client in list(self.clients):
            client.close()
        self.deferred.clear()
        if self.replay is not None:
            self.replay.cancel()
        if self.replay_position is not None:
            self.replay_position.close()
        try:
            return self.queue.persist(leftovers) + kept
        finally:
            self.queue.close()
            if disk is not None:
                disk.close()

    def delete(self) -> None:
        self.exiting = True
        if self.replay is not None:
            self.replay.cancel()
        if self.replay_position is not None:
            self.replay_position.remove()
        self._leave_timed()
        self._drop_in_flight()
        for client in list(self.clients):
            client.close()
        self.deferred.clear()
        self.queue.delete()
        if self.deferred_disk is not None:
            self.deferred_disk.delete()

    def _drop_in_flight(self) -> list[Message]:
        held = self.in_flight.clear()
        for message in held:
            self._released(message)
        return held
