"""A message as a consumer sees it, with the responses it can send."""

from collections.abc import Callable

from ..protocol import commands
from .config import Config
from .conn import Connection


class Message:
    """``finish()``, ``requeue()`` and ``touch()`` answer nsqd; the first
    finish or requeue is the message's response, later ones are ignored.

    With auto-response (the default) the consumer FINs when the handler
    returns and REQs when it raises; ``disable_auto_response()`` hands that
    to the handler (for work that finishes later).
    """

    __slots__ = ("id", "body", "timestamp", "attempts", "dedup_key", "connection", "_config", "_on_answered",
                 "_responded", "_auto")

    def __init__(self, message_id: bytes, body: bytes, timestamp: int, attempts: int, connection: Connection,
                 config: Config, on_answered: Callable[["Message", bool, bool], None]):
        """``on_answered(message, requeued, backoff)``: told of the message's one response."""
        self.id = message_id
        self.body = body
        self.timestamp = timestamp
        self.attempts = attempts
        self.dedup_key: str | None = None  # set by a consumer with dedup, from the body's key line
        self.connection = connection  # the one it came on, and the only one it can be answered on
        self._config = config
        self._on_answered = on_answered
        self._responded = False
        self._auto = True

    def __repr__(self) -> str:
        return f"Message(id={self.id!r}, attempts={self.attempts}, body={self.body[:40]!r})"

    @property
    def nsqd_address(self) -> str:
        """The ``host:port`` of the nsqd it came from."""
        return self.connection.address

    @property
    def has_responded(self) -> bool:
        """A FIN or REQ was sent (or claimed) for it."""
        return self._responded

    @property
    def can_respond(self) -> bool:
        """False once answered, or once the connection it came on has closed:
        nsqd then redelivers it, to this consumer or another, whatever is sent."""
        return not self._responded and not self.connection.closed

    def claim_response(self) -> bool:
        """Mark the message answered by its holder, who sends the FIN itself
        (``Consumer.finish_all`` batches them); False if it cannot respond."""
        if not self.can_respond:
            return False
        self._responded = True
        return True

    @property
    def auto_response(self) -> bool:
        """The consumer answers for the handler (FIN when it returns, REQ when it raises)."""
        return self._auto

    def disable_auto_response(self) -> None:
        """The handler answers itself, now or later."""
        self._auto = False

    def finish(self) -> None:
        """FIN: handled; nsqd forgets it."""
        if self._responded:
            return
        self._responded = True
        self.connection.finish((self.id,))
        self._on_answered(self, False, False)

    def requeue(self, delay: float | None = None, backoff: bool = True) -> None:
        """REQ: back to nsqd, redelivered after ``delay`` seconds (None: the
        configured default times attempts, capped). ``backoff`` slows this
        consumer down, as go-nsq's Requeue does."""
        if self._responded:
            return
        self._responded = True
        if delay is None:
            config = self._config
            delay = min(config.default_requeue_delay * self.attempts, config.max_requeue_delay)
        self.connection.send(commands.req(self.id, int(delay * 1000)))
        self._on_answered(self, True, backoff)

    def touch(self) -> None:
        """Reset nsqd's timeout for this in-flight message."""
        if not self._responded:
            self.connection.send(commands.touch(self.id))
