"""An MPUB's messages, queued as the one buffer they arrived in.

Published messages that wait in a queue are what nsqd's memory is made of,
and fresh memory is what publishing costs most: every page a long-lived
object lands on is faulted in by the kernel. So an MPUB's validated body
stays as it came, ``[count]([size][body])*``, with its ids reserved
(guid.py), and each ``Message`` is made only when the queue hands it out,
in memory that the messages finished before it have just freed. A queued
message costs its body and four bytes instead of three objects.
"""

from mypy_extensions import mypyc_attr

from ..protocol.commands import int32_at
from .guid import IdSequence
from .message import Message


@mypyc_attr(acyclic=True)
class Batch:
    __slots__ = ("payload", "pos", "remaining", "timestamp", "ids")

    def __init__(self, payload: bytes, count: int, timestamp: int, ids: IdSequence, pos: int = 4):
        self.payload = payload
        self.pos = pos  # the next message's size field
        self.remaining = count
        self.timestamp = timestamp
        self.ids = ids

    def take(self) -> Message:
        """The next message; only while ``remaining``."""
        payload = self.payload
        pos = self.pos
        start = pos + 4
        end = start + int32_at(payload, pos)
        self.pos = end
        self.remaining -= 1
        return Message(self.ids.next(), payload[start:end], self.timestamp)

    def take_all(self) -> list[Message]:
        return [self.take() for _ in range(self.remaining)]

    def copy(self) -> "Batch":
        """The same messages from here on, for another channel (each channel
        has its own copy of a message)."""
        return Batch(self.payload, self.remaining, self.timestamp, self.ids.copy(), self.pos)
