"""A message inside nsqd: the wire fields plus its in-flight bookkeeping."""

from typing import Any

from mypy_extensions import mypyc_attr

from ..protocol.message import encode_message, message_fields


@mypyc_attr(acyclic=True)
class Message:
    """One copy of a message on one topic or channel.

    Each channel gets its own copy because attempts and in-flight state are
    per channel. ``defer`` (seconds) is set only while a deferred publish
    waits at the topic for a channel. ``disk_token`` is ``(disk queue, token)``
    while the record this message was read from must stay on disk (until FIN,
    or until the message is written to disk again). ``offset`` is the
    record's offset in its topic's log when a replay queued it (else -1):
    until the channel is through with it, the replay's saved position stays
    at or before it (replay_position.py).

    Compiled, messages are left out of the cyclic garbage collector
    (``acyclic``): millions of them sit in a queue under load, and each
    full collection walked them all. A message refers to its client only
    while in flight, and the channel clears that when the message is
    answered, times out or its client goes, so no cycle outlives them.
    """

    __slots__ = ("id", "body", "timestamp", "attempts", "defer", "client", "delivered_at", "deadline", "timeout",
                 "disk_token", "offset")

    def __init__(self, message_id: bytes, body: bytes, timestamp: int, attempts: int = 0, defer: float = 0.0,
                 offset: int = -1):
        self.id = message_id
        self.body = body
        self.timestamp = timestamp
        self.attempts = attempts
        self.defer = defer
        self.client: Any = None  # the connection holding it in flight (duck-typed: tests pass stand-ins)
        self.delivered_at = 0.0
        self.deadline = 0.0
        self.timeout = 0.0  # the msg_timeout it was delivered with
        self.disk_token: tuple[Any, Any] | None = None
        self.offset = offset

    def copy(self) -> "Message":
        return Message(self.id, self.body, self.timestamp, self.attempts, self.defer)

    def encode(self) -> bytes:
        """The disk queue record (NSQ's layout; deferral is not part of it)."""
        return encode_message(self.timestamp, self.attempts, self.id, self.body)

    @classmethod
    def decode(cls, record: bytes) -> "Message":
        timestamp, attempts, message_id, body = message_fields(record)
        return cls(message_id, body, timestamp, attempts)
