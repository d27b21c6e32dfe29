"""A channel's in-flight messages, found by id and by deadline.

NSQ's channel keeps its in-flight messages in a map by id and a heap by
deadline, side by side. Both costs are avoidable in Python: messages
started with the same timeout (a client's msg_timeout) expire in the order
they were started, so each timeout gets one insertion-ordered dict by id,
read from the front by the scan; a delivery and a FIN each cost one dict
operation (there are as many dicts as distinct timeouts, usually one). Only
a TOUCH clamped by ``--max-msg-timeout`` gives a message an earlier
deadline than its place says; those few are kept apart, their deadlines in
a heap (whose entries for messages answered meanwhile are skipped when they
come up).

The channel is the only user: it decides who may answer a message and keeps
the clients' counts; this class only keeps the messages and their deadlines.
"""

import heapq
import itertools

from .message import Message


class InFlight:
    def __init__(self) -> None:
        self._by_timeout: dict[float, dict[bytes, Message]] = {}  # each in deadline order
        self._clamped: dict[bytes, Message] = {}  # TOUCHed out of their timeout's order
        self._deadlines: list[tuple[float, int, Message]] = []  # the clamped ones', as a heap
        self._order = itertools.count()

    def __len__(self) -> int:
        return sum(map(len, self._by_timeout.values())) + len(self._clamped)

    def __contains__(self, message_id: bytes) -> bool:
        return self.get(message_id) is not None

    def get(self, message_id: bytes) -> Message | None:
        for queue in self._by_timeout.values():
            message = queue.get(message_id)
            if message is not None:
                return message
        return self._clamped.get(message_id)

    def start(self, messages: list[Message], client, now: float, timeout: float) -> None:
        """``messages`` (one burst to one client) are in flight from ``now``."""
        queue = self._by_timeout.get(timeout)
        if queue is None:
            queue = self._by_timeout[timeout] = {}
        deadline = now + timeout
        for message in messages:
            message.client = client
            message.delivered_at = now
            message.deadline = deadline
            message.timeout = timeout
            queue[message.id] = message

    def take(self, message_id: bytes, client) -> Message | None:
        """Take ``message_id`` out if ``client`` holds it (a FIN's or REQ's
        one lookup); None otherwise, and nothing changes."""
        for queue in self._by_timeout.values():
            message = queue.get(message_id)
            if message is not None:
                break
        else:
            queue = self._clamped
            message = queue.get(message_id)
        if message is None or message.client is not client:
            return None
        del queue[message_id]
        return message

    def _queue_of(self, message: Message) -> dict:
        return self._clamped if self._clamped.get(message.id) is message else self._by_timeout[message.timeout]

    def touch(self, message: Message, now: float, max_msg_timeout: float) -> None:
        """A new deadline: the message's timeout from now, but never past
        ``max_msg_timeout`` after it was delivered (NSQ's rule)."""
        del self._queue_of(message)[message.id]
        deadline = now + message.timeout
        ceiling = message.delivered_at + max_msg_timeout
        if deadline <= ceiling:
            message.deadline = deadline
            self._by_timeout[message.timeout][message.id] = message  # the latest of its timeout: the back
        else:
            message.deadline = ceiling
            self._clamped[message.id] = message
            heapq.heappush(self._deadlines, (ceiling, next(self._order), message))

    def expired(self, now: float) -> list[Message]:
        """Take out and return every message whose deadline has passed."""
        expired = []
        for queue in self._by_timeout.values():
            while queue:
                message = next(iter(queue.values()))
                if message.deadline > now:
                    break
                del queue[message.id]
                expired.append(message)
        clamped, deadlines = self._clamped, self._deadlines
        while deadlines and deadlines[0][0] <= now:
            deadline, _, message = heapq.heappop(deadlines)
            if clamped.get(message.id) is message and message.deadline == deadline:
                del clamped[message.id]
                expired.append(message)
        return expired

    def remove_client(self, client) -> list[Message]:
        """Take out every message ``client`` holds (it went away)."""
        held = []
        for queue in [*self._by_timeout.values(), self._clamped]:
            mine = [m for m in queue.values() if m.client is client]
            for message in mine:
                del queue[message.id]
            held += mine
        return held

    def messages(self) -> list[Message]:
        """Everything in flight, left in flight."""
        return [m for queue in [*self._by_timeout.values(), self._clamped] for m in queue.values()]

    def clear(self) -> list[Message]:
        """Take out everything, for the channel's close or empty."""
        held = self.messages()
        self._by_timeout.clear()
        self._clamped.clear()
        self._deadlines.clear()
        return held
