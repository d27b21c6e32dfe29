"""Dropping the copies of a message that carries a dedup key, sans-IO.

A Producer with ``replicas`` publishes each message to several nsqd behind
one key (``protocol.dedupkey``); a consumer of all of them receives every
copy. The window remembers the keys of messages handled successfully (the
last ``max_keys``, for at most ``max_age`` seconds) and answers for each
arriving copy: handle it, drop it (a copy of something handled: FIN it
unhandled), or hold it while another copy is being handled. A held copy is
dropped when that one finishes, and handled in its place when it is
requeued, so a copy is never thrown away on the strength of work that
failed. Holding rather than requeueing keeps the copy's attempts unchanged.
"""

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from .errors import InvalidArgumentError

DELIVER, DROP, HOLD = "deliver", "drop", "hold"

Copy = TypeVar("Copy")  # a copy of a message, as the consumer holds it


class DedupWindow(Generic[Copy]):
    """What ``Consumer(dedup=...)`` remembers to handle each replicated
    message once: the keys handled lately, and the copies waiting on one.

    ``DedupWindow(max_keys, max_age)`` sizes it (the default: 100,000 keys
    for 10 minutes); a copy that arrives after its key left the window is
    handled again.
    """

    def __init__(self, max_keys: int = 100_000, max_age: float = 600.0,
                 clock: Callable[[], float] = time.monotonic):
        if max_keys < 1 or max_age <= 0:
            raise InvalidArgumentError("max_keys must be >= 1 and max_age > 0")
        self.max_keys = max_keys
        self.max_age = max_age
        self.clock = clock
        self.copies_dropped = 0
        self._done: OrderedDict[str, float] = OrderedDict()  # key -> when handled, oldest first
        self._handling: dict[str, Copy] = {}  # key -> the copy being handled
        self._held: dict[str, list[Copy]] = {}  # key -> copies waiting for its outcome

    def __len__(self) -> int:
        return len(self._done)

    def admit(self, key: str, message: Copy) -> str:
        """``DELIVER`` (handle it), ``DROP`` (a copy of one handled: FIN it
        unhandled) or ``HOLD`` (another copy is being handled: wait for it)."""
        self._expire()
        if key in self._done:
            self.copies_dropped += 1
            return DROP
        if key in self._handling:
            self._held.setdefault(key, []).append(message)
            return HOLD
        self._handling[key] = message
        return DELIVER

    def finished(self, key: str, message: Copy) -> list[Copy]:
        """``message`` was handled: returns the held copies, to be FINished unhandled."""
        if self._handling.get(key) is message:
            del self._handling[key]
        self._done[key] = self.clock()
        self._done.move_to_end(key)
        self._expire()
        held = self._held.pop(key, [])
        self.copies_dropped += len(held)
        return held

    def requeued(self, key: str, message: Copy) -> Copy | None:
        """``message`` failed and went back to nsqd: returns a held copy to
        handle in its place (now the one being handled), or None."""
        if self._handling.get(key) is not message:
            return None
        del self._handling[key]
        held = self._held.get(key)
        if not held:
            return None
        successor = held.pop(0)
        if not held:
            del self._held[key]
        self._handling[key] = successor
        return successor

    def _expire(self) -> None:
        horizon = self.clock() - self.max_age
        done = self._done
        while done and (len(done) > self.max_keys or next(iter(done.values())) < horizon):
            done.popitem(last=False)
