"""The backlog of a topic or a channel: memory first, disk beyond it."""

from collections import deque

from ..diskqueue import DiskQueue
from .message import Message


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


class MessageQueue:
    """Holds up to ``capacity`` messages in memory and overflows to ``disk``.

    Without a disk queue (ephemeral topics and channels) overflow is dropped,
    as NSQ drops it. ``put`` raises ``OSError`` when the disk refuses a write,
    so the publisher hears about it.
    """

    __slots__ = ("memory", "capacity", "disk", "dropped", "_prefer_disk")

    def __init__(self, capacity: int, disk: DiskQueue | None):
        self.memory: deque[Message] = deque()
        self.capacity = capacity
        self.disk = disk
        self.dropped = 0
        self._prefer_disk = False

    def __len__(self) -> int:
        disk = self.disk
        return len(self.memory) + (disk.depth if disk is not None else 0)

    @property
    def backend_depth(self) -> int:
        return self.disk.depth if self.disk is not None else 0

    @property
    def unsynced_count(self) -> int:
        """Messages written to disk but not yet fsynced."""
        return self.disk.unsynced_writes if self.disk is not None else 0

    def put(self, message: Message) -> None:
        """A message back in memory keeps its disk record; one written to disk
        again releases the old record only once the new one is written."""
        if len(self.memory) < self.capacity:
            self.memory.append(message)
        elif self.disk is not None:
            self.disk.put(message.encode())
            self.ack(message)
        else:
            self.dropped += 1

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
        room = self.capacity - len(self.memory)
        if room >= len(messages):
            self.memory.extend(messages)
            return
        if room > 0:
            self.memory.extend(messages[:room])
        rest = messages[max(room, 0):]
        if self.disk is not None:
            self.disk.put_many([message.encode() for message in rest])
        else:
            self.dropped += len(rest)

    def pop(self) -> Message | None:
        """The next message. Memory and disk take turns when both hold some,
        so neither starves (NSQ picks between them at random)."""
        disk = self.disk
        if disk is not None and disk.depth:
            prefer_disk = self._prefer_disk = not self._prefer_disk
            if prefer_disk or not self.memory:
                taken = disk.get_with_token()
                if taken is not None:
                    message = Message.decode(taken[0])
                    message.disk_token = (disk, taken[1])
                    return message
        if self.memory:
            return self.memory.popleft()
        return None

    def persist(self, messages) -> int:
        """Write ``messages`` and the memory backlog to disk (clean shutdown).
        Raises ``MessagesLost`` when the disk refuses: what was not written
        is gone, and the operator must hear how much."""
        if self.disk is None:
            return 0
        pending = [*messages, *self.memory]
        self.memory.clear()
        for written, message in enumerate(pending):
            try:
                self.disk.put(message.encode())
            except OSError as error:
                raise MessagesLost(len(pending) - written, written, error) from None
            self.ack(message)
        return len(pending)

    def clear(self) -> None:
        self.memory.clear()
        if self.disk is not None:
            self.disk.empty()

    def close(self) -> None:
        if self.disk is not None:
            self.disk.close()

    def delete(self) -> None:
        self.memory.clear()
        if self.disk is not None:
            self.disk.delete()
