"""The backlog of a topic or a channel: memory first, disk beyond it."""

from collections import deque
from collections.abc import Iterator
from itertools import chain, islice
from typing import Any, Final, Protocol

from .batch import Batch
from .message import Message


PERSIST_CHUNK: Final = 10000  # messages written at once at shutdown


class MessagesLost(Exception):
    """A shutdown wrote ``persisted`` messages and could not write ``lost``."""

    def __init__(self, lost: int, persisted: int, cause: OSError):
        super().__init__(f"{lost} messages could not be written: {cause.strerror or cause}")
        self.lost = lost
        self.persisted = persisted
        self.cause = cause

    @staticmethod
    def tally(closers) -> int:
        """Run every closer (each returns how many it persisted) even when one
        loses messages; -> the total persisted, or MessagesLost for them all."""
        persisted = lost = 0
        cause: OSError | None = None
        for close in closers:
            try:
                persisted += close()
            except MessagesLost as error:
                persisted += error.persisted
                lost += error.lost
                cause = cause or error.cause
        if cause is not None:  # set with every loss
            raise MessagesLost(lost, persisted, cause)
        return persisted


class Backing(Protocol):
    """Where a queue keeps what memory does not: a ``DiskQueue``, or on a
    retained topic in durable mode a cursor over the topic's log
    (``topiclog/cursor.py``), which answers the same calls."""

    depth: int
    unsynced_writes: int
    moving: tuple[int, int] | None  # a record being dead-lettered (dead_letter.py)

    def put(self, data: bytes) -> None: ...
    def put_many(self, records: list[bytes]) -> None: ...
    def rewrite(self, token: Any, data: bytes) -> None: ...
    def get_with_token(self) -> tuple[bytes, Any] | None: ...
    def mark_of(self, token: Any) -> int: ...
    def set_marks(self, marks: list[tuple[Any, int]]) -> None: ...
    def ack(self, token: Any) -> None: ...
    def unread(self) -> Iterator[bytes]: ...
    def record_at(self, start: tuple[int, int]) -> bytes: ...
    def empty(self) -> None: ...
    def close(self) -> None: ...
    def delete(self) -> None: ...


class MessageQueue:
    """Holds up to ``capacity`` messages in memory and overflows to ``disk``.

    Without a disk queue (ephemeral topics and channels) overflow is dropped,
    as NSQ drops it. ``put`` raises ``OSError`` when the disk refuses a write,
    so the publisher hears about it. Memory holds messages and MPUB batches
    (batch.py), each counted by the messages in it (``memory_depth``).

    The oldest message goes first, whichever side holds it (``pop``).
    """

    __slots__ = ("memory", "memory_depth", "capacity", "disk", "dropped", "_disk_head", "_disk_turn")

    def __init__(self, capacity: int, disk: Backing | None):
        self.memory: deque[Message | Batch] = deque()
        self.memory_depth = 0
        self.capacity = capacity
        self.disk = disk
        self.dropped = 0
        # the next disk message, read to compare its age with memory's next;
        # its record stays on disk, unacknowledged, until it is delivered
        self._disk_head: Message | None = None
        self._disk_turn = False  # while a redelivery is next on either side, the sides take turns

    def __len__(self) -> int:
        return self.memory_depth + self.backend_depth

    @property
    def backend_depth(self) -> int:
        disk = self.disk
        if disk is None:
            return 0
        return disk.depth + (self._disk_head is not None)

    @property
    def unsynced_count(self) -> int:
        """Messages written to disk but not yet fsynced."""
        return self.disk.unsynced_writes if self.disk is not None else 0

    def put(self, message: Message) -> bool:
        """A message back in memory keeps its disk record. Without room, one
        read from this queue's disk is rewritten there in one step (a crash
        leaves one record of it); one whose record is on another disk (a
        due deferred publish) stays in memory all the same, keeping that
        record: it was in memory while deferred, and a move between two
        disks would take two steps a crash could split. -> whether it is in
        memory (else on disk, or dropped without one)."""
        disk = self.disk
        held = message.disk_token
        if self.memory_depth < self.capacity or (held is not None and held[0] is not disk):
            self.memory.append(message)
            self.memory_depth += 1
            return True
        if disk is not None:
            if held is not None:
                disk.rewrite(held[1], message.encode())
                message.disk_token = None
            else:
                disk.put(message.encode())
        else:
            self.dropped += 1
        return False

    @staticmethod
    def ack(message: Message) -> None:
        """``message`` is delivered (or durable elsewhere): its record may go,
        from whichever disk queue holds it."""
        held = message.disk_token
        if held is not None:
            message.disk_token = None
            disk, token = held
            disk.ack(token)

    def put_many(self, messages: list[Message]) -> None:
        """New messages (no disk records yet): memory while it has room, then
        disk in one batch."""
        room = self.capacity - self.memory_depth
        if room >= len(messages):
            self.memory.extend(messages)
            self.memory_depth += len(messages)
            return
        if room > 0:
            self.memory.extend(messages[:room])
            self.memory_depth += room
        rest = messages[max(room, 0):]
        if self.disk is not None:
            self.disk.put_many([message.encode() for message in rest])
        else:
            self.dropped += len(rest)

    def put_batch(self, batch: Batch) -> None:
        """An MPUB's messages: kept whole while memory has room for them all."""
        if self.capacity - self.memory_depth >= batch.remaining:
            self.memory_depth += batch.remaining
            self.memory.append(batch)
        else:
            self.put_many(batch.take_all())

    def in_memory(self) -> list[Message]:
        """Every message queued in memory, left in place (a replicated
        nsqd copies them to a new peer: replication/snapshot.py)."""
        found: list[Message] = [] if self._disk_head is None else [self._disk_head]
        for entry in self.memory:
            if isinstance(entry, Batch):
                found.extend(entry.copy().take_all())
            else:
                found.append(entry)
        return found

    def on_disk(self) -> Iterator[bytes]:
        """Every message queued on disk now, encoded, read as the iterator
        is (DiskQueue.unread), the queue left as it is."""
        return iter(()) if self.disk is None else self.disk.unread()

    def pop(self) -> Message | None:
        """The next message: of memory's next and disk's next, the one
        published first. So an overflow keeps its order (memory fills first,
        later messages go to disk, and those published once memory has room
        again come after them). A redelivery keeps its publish time, so while
        one is next on either side the sides take turns instead: messages
        requeued again and again never starve the other side (NSQ picks
        between the two at random)."""
        disk_head = self._disk_head
        if disk_head is None:
            disk = self.disk
            if disk is not None and disk.depth:
                disk_head = self._disk_head = self._read_disk(disk)
        if disk_head is not None and (not self.memory_depth or self._disk_first(disk_head)):
            self._disk_head = None
            return disk_head
        if not self.memory_depth:
            return None
        self.memory_depth -= 1
        head = self.memory[0]
        if isinstance(head, Message):
            self.memory.popleft()
            return head
        message = head.take()
        if not head.remaining:
            self.memory.popleft()
        return message

    def _disk_first(self, disk_head: Message) -> bool:
        head = self.memory[0]
        if disk_head.attempts or (isinstance(head, Message) and head.attempts):
            self._disk_turn = not self._disk_turn
            return self._disk_turn
        if disk_head.timestamp != head.timestamp:
            return disk_head.timestamp < head.timestamp
        # one publish split between the sides (an overflow, or a replay resumed behind what a clean stop
        # saved to disk): nsqd's ids grow within a publish
        return isinstance(head, Message) and disk_head.id < head.id

    @staticmethod
    def _read_disk(disk: Backing) -> Message | None:
        """The disk's next message, with the attempts its record was marked
        with when last delivered (``note_deliveries``), crashes included."""
        taken = disk.get_with_token()
        if taken is None:
            return None
        data, token = taken
        return MessageQueue.held(Message.decode(data), disk, token)

    @staticmethod
    def held(message: Message, disk: Backing, token) -> Message:
        """``message``, read from ``disk`` as ``token``, holding that record,
        with the attempts its record was marked with (``note_deliveries``)."""
        message.disk_token = (disk, token)
        delivered = disk.mark_of(token)
        if delivered > message.attempts:
            message.attempts = delivered
        return message

    @staticmethod
    def note_deliveries(messages: list[Message]) -> None:
        """``messages``, each read from a disk queue, are about to go out:
        their records are marked with the attempts they will then have, one
        sync towards each queue's ``sync_every``, flushed once per loop turn.
        So a message's attempts survive kill -9 (a power loss: with
        --sync-every=1 exactly, otherwise up to the last sync), and a crash
        costs at most one delivery more."""
        by_disk: dict[Any, list] = {}
        for message in messages:
            held = message.disk_token
            assert held is not None
            disk, token = held
            marks = by_disk.get(disk)
            if marks is None:
                marks = by_disk[disk] = []
            marks.append((token, min(message.attempts + 1, 0xFFFF)))
        for disk, marks in by_disk.items():
            disk.set_marks(marks)

    def _drain_memory(self) -> Iterator[Message]:
        """Everything in memory, as messages made one at a time (``persist``
        then clears the count)."""
        memory = self.memory
        while memory:
            item = memory.popleft()
            if isinstance(item, Message):
                yield item
            else:
                while item.remaining:
                    yield item.take()

    def _clear_memory(self) -> None:
        self.memory.clear()
        self.memory_depth = 0

    def persist(self, messages: list[Message]) -> int:
        """Write ``messages`` and the memory backlog to disk (clean shutdown),
        ``PERSIST_CHUNK`` at a time: one write and one count towards a sync
        each. Raises ``MessagesLost`` when the disk refuses: what was not
        written is gone, and the operator must hear how much. The disk's next
        message needs nothing: its record is still there, unacknowledged."""
        disk = self.disk
        if disk is None:
            return 0
        self._disk_head = None
        pending = len(messages) + self.memory_depth
        written = 0
        remaining = chain(messages, self._drain_memory())
        try:
            while chunk := list(islice(remaining, PERSIST_CHUNK)):
                depth = disk.depth
                try:
                    disk.put_many([message.encode() for message in chunk])
                except OSError as error:
                    done = disk.depth - depth
                    for message in chunk[:done]:
                        self.ack(message)
                    written += done
                    raise MessagesLost(pending - written, written, error) from None
                for message in chunk:
                    self.ack(message)
                written += len(chunk)
        finally:
            self._clear_memory()  # what was not written is counted lost, not left behind
        return written

    def clear(self) -> None:
        self._clear_memory()
        self._disk_head = None
        if self.disk is not None:
            self.disk.empty()

    def close(self) -> None:
        if self.disk is not None:
            self.disk.close()

    def delete(self) -> None:
        self._clear_memory()
        self._disk_head = None
        if self.disk is not None:
            self.disk.delete()


class Consumer(Protocol):
    def window(self) -> int: ...


class HandoffQueue(MessageQueue):
    """An ephemeral channel's queue in durable mode (--mem-queue-size=0):
    it keeps nothing, in memory or on disk, so it holds a message only for
    a consumer ready to take it and drops it otherwise. NSQ's nsqd does the
    same with an unbuffered channel: a put hands the message to a client's
    pump waiting for one (RDY room, nothing being sent) or else to a
    backend that discards it. Here a put admits as many as the subscribed
    clients' RDY windows (less what they hold in flight) have room for,
    less what is already queued for the next dispatch.

    Cost: each put asks the clients' windows, one call each, stopping once
    they cover what is queued and incoming. Only such channels pay it: a
    channel picks this queue once, when it is made (``Channel.__init__``),
    so every other channel's put stays ``MessageQueue``'s.
    """

    __slots__ = ("clients",)

    def __init__(self, clients: list[Consumer]):
        super().__init__(0, None)
        self.clients = clients  # the channel's, which adds and removes them

    def put(self, message: Message) -> bool:
        self._make_room(1)
        return super().put(message)

    def put_many(self, messages: list[Message]) -> None:
        self._make_room(len(messages))
        super().put_many(messages)

    def put_batch(self, batch: Batch) -> None:
        self._make_room(batch.remaining)
        super().put_batch(batch)

    def _make_room(self, incoming: int) -> None:
        """Memory holds what the ready clients take now: what is queued
        plus ``incoming``, or less if their windows are smaller."""
        wanted = self.memory_depth + incoming
        room = 0
        for client in self.clients:
            window = client.window()
            if window > 0:
                room += window
                if room >= wanted:
                    break
        self.capacity = room
